"""Collection querying over records (MCP-AQL collection querying, MCP-AQL pagination).

`filter` maps dot paths to a value (equality) or to operators (`eq`, `ne`, `gt`, `gte`, `lt`,
`lte`, `in`, `contains`, `exists`); `query` is free text with OR semantics over words and
"quoted phrases", case-insensitive, over every string value; `sort` is `{field, order}`.
This module only validates them into a `store.listing.Listing`; the engine runs it (docs/store.md).
Cursors are opaque base64url tokens holding the sort key of an item (`Key`) and a digest of the
query they were issued for (collection, filter, search text, sort): a cursor is only valid with
that same query, and one that is malformed, forged into a key no listing produces, or from another
query is a validation error naming its parameter (docs/input.md, "Cursors"). They are not signed
(replicas share no key): a forged but well-formed cursor only moves the caller within what it may
list anyway.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

import orjson

from aql_mcp.plugin import VALIDATION_INVALID_TYPE, OperationError
from aql_mcp.plugins.records.listing import ORDERING, Condition, Key, Listing, Operator, key_from_json
from aql_mcp.plugins.records.params import NAME_PATTERN

OPERATORS = frozenset({"eq", "ne", "gt", "gte", "lt", "lte", "in", "contains", "exists"})
PHRASE = re.compile(r'"([^"]+)"|(\S+)')
MAX_CONDITIONS = 20
MAX_TERMS = 20
NAME_ORDER = "collections:name:asc"


@dataclass(frozen=True, slots=True)
class Window:
    """The validated pagination request: `first`/`after` forward or `last`/`before` backward."""

    size: int
    forward: bool
    cursor: str | None


def window(
    first: int | None, after: str | None, last: int | None, before: str | None, *, default: int, cap: int
) -> Window:
    """The pagination window; invalid combinations refused (MCP-AQL pagination §2.3), sizes clamped (§5.3)."""
    provided = [
        name
        for name, value in (("first", first), ("after", after), ("last", last), ("before", before))
        if value is not None
    ]
    conflict = (
        (first is not None and last is not None)
        or (after is not None and first is None)
        or (before is not None and last is None)
        or (first is not None and before is not None)
        or (last is not None and after is not None)
    )
    if conflict:
        raise OperationError(
            VALIDATION_INVALID_TYPE,
            f"Invalid pagination combination: {', '.join(provided)}",
            {
                "param_name": "pagination",
                "expected_type": "valid pagination combination",
                "actual_type": "conflicting parameters",
                "provided": provided,
                "hint": "Use 'first' (+ 'after') for forward pagination or 'last' (+ 'before') for backward pagination",
            },
        )
    if last is not None:
        return Window(min(last, cap), False, before)
    return Window(min(first if first is not None else default, cap), True, after)


def listing(
    span: Window,
    *,
    spec: Mapping[str, Any] | None,
    query: str | None,
    sort_field: str | None,
    descending: bool,
    identity: str,
) -> Listing:
    """The validated request as the engine takes it; `identity` is the query's (`query_identity`)."""
    sort = _path(sort_field, "sort.field") if sort_field else None
    param = "after" if span.forward else "before"
    cursor = decode_cursor(span.cursor, identity, param) if span.cursor is not None else None
    return Listing(
        size=span.size,
        forward=span.forward,
        cursor=cursor,
        conditions=parse_filter(spec or {}),
        terms=parse_terms(query) if query is not None else (),
        sort=sort,
        descending=descending,
    )


def query_identity(
    collection: str, spec: Mapping[str, Any] | None, query: str | None, field: str | None, descending: bool
) -> str:
    """What a cursor is bound to: a short digest of the query it was issued for (no sort is creation
    order, ascending). Filter keys are sorted, so the same filter written in another order matches."""
    shape = [collection, spec or {}, query, field or "", descending]
    digest = hashlib.sha256(orjson.dumps(shape, option=orjson.OPT_SORT_KEYS)).digest()
    return base64.urlsafe_b64encode(digest[:9]).decode("ascii")


def parse_filter(spec: Mapping[str, Any]) -> tuple[Condition, ...]:
    if len(spec) > MAX_CONDITIONS:
        raise _bad_filter("", f"at most {MAX_CONDITIONS} conditions")
    conditions: list[Condition] = []
    for path, condition in spec.items():
        segments = _path(path, f"filter.{path}")
        if isinstance(condition, dict) and condition and set(condition) <= OPERATORS:
            conditions += [_operator(segments, path, op, operand) for op, operand in condition.items()]
        elif isinstance(condition, dict) and set(condition) & OPERATORS:
            unknown = sorted(set(condition) - OPERATORS)
            raise _bad_filter(path, f"unknown operator(s) {', '.join(unknown)}")
        else:
            conditions.append(Condition(segments, "eq", condition))
    return tuple(conditions)


def _operator(segments: tuple[str, ...], path: str, op: str, operand: Any) -> Condition:
    if op == "in" and not isinstance(operand, list):
        raise _bad_filter(path, "'in' expects an array")
    if op in ORDERING and (isinstance(operand, bool) or not isinstance(operand, int | float | str)):
        raise _bad_filter(path, f"'{op}' expects a number or a string")
    return Condition(segments, cast(Operator, op), operand)


def _path(dotted: str, param: str) -> tuple[str, ...]:
    """Dot path segments; a segment must be a non-empty key without a double quote (JSON paths quote keys)."""
    segments = tuple(dotted.split("."))
    if not all(segments) or any('"' in s or len(s) > 200 for s in segments) or len(segments) > 16:
        raise OperationError(
            VALIDATION_INVALID_TYPE,
            f"Parameter '{param}' expected 'a dot path of object keys such as metadata.priority'",
            {"param_name": param, "expected_type": "dot path", "actual_type": "string"},
        )
    return segments


def _bad_filter(path: str, reason: str) -> OperationError:
    name = f"filter.{path}" if path else "filter"
    return OperationError(
        VALIDATION_INVALID_TYPE,
        f"Parameter '{name}' expected 'a value or an operator object', got an invalid condition: {reason}",
        {
            "param_name": name,
            "expected_type": "value or {operator: operand}",
            "actual_type": "object",
            "operators": sorted(OPERATORS),
        },
    )


def parse_terms(query: str) -> tuple[str, ...]:
    """Lower-cased words and phrases; a query of blanks matches everything (no terms)."""
    terms = tuple(dict.fromkeys((phrase or word).lower() for phrase, word in PHRASE.findall(query)))
    if len(terms) > MAX_TERMS:
        raise OperationError(
            VALIDATION_INVALID_TYPE,
            f"Parameter 'query' expected 'at most {MAX_TERMS} words or phrases'",
            {"param_name": "query", "expected_type": "search text", "actual_type": "string"},
        )
    return terms


def encode_cursor(key: Key, identity: str) -> str:
    """A cursor over records: the sort key it continues from and the query it belongs to."""
    return _pack({"k": [key.rank, key.number, key.text, key.position], "q": identity})


def encode_name_cursor(name: str) -> str:
    """A cursor over collections: the name it continues from (collections list in name order)."""
    return _pack({"n": name, "s": NAME_ORDER})


def decode_cursor(cursor: Any, identity: str, param: str) -> Key:
    """The key `cursor` holds; `VALIDATION_INVALID_TYPE` naming `param` for anything this server
    did not issue for this query."""
    raw = _unpack(cursor)
    if not isinstance(raw, dict) or set(raw) != {"k", "q"} or raw["q"] != identity:
        raise _bad_cursor(param)
    key = key_from_json(raw["k"])
    if key is None:
        raise _bad_cursor(param)
    return key


def decode_name_cursor(cursor: Any, param: str) -> str:
    """The collection name `cursor` holds; the same refusal as `decode_cursor` for anything else."""
    raw = _unpack(cursor)
    if not isinstance(raw, dict) or set(raw) != {"n", "s"} or raw["s"] != NAME_ORDER:
        raise _bad_cursor(param)
    name = raw["n"]
    if not isinstance(name, str) or not re.fullmatch(NAME_PATTERN, name):
        raise _bad_cursor(param)
    return name


def _pack(content: Any) -> str:
    """An opaque cursor: `content` as JSON in unpadded base64url (URL-safe, pagination §6.2)."""
    return base64.urlsafe_b64encode(orjson.dumps(content)).decode("ascii").rstrip("=")


def _unpack(cursor: Any) -> Any | None:
    """What `_pack` put in `cursor`, or None for anything that is not a non-empty string of
    base64url JSON (not a string, not base64, not UTF-8, not JSON)."""
    if not isinstance(cursor, str) or not cursor:
        return None
    try:
        return orjson.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (ValueError, binascii.Error):  # orjson.JSONDecodeError is a ValueError
        return None


def _bad_cursor(param: str) -> OperationError:
    return OperationError(
        VALIDATION_INVALID_TYPE,
        f"Parameter '{param}' expected 'a cursor from pageInfo of the same query'",
        {"param_name": param, "expected_type": "cursor", "actual_type": "string"},
    )
