"""Collection querying over records (docs/features/collection-querying.md, pagination.md).

`filter` maps dot paths to a value (equality) or to operators (`eq`, `ne`, `gt`, `gte`, `lt`,
`lte`, `in`, `contains`, `exists`); `query` is free text with OR semantics over words and
"quoted phrases", case-insensitive, over every string value; `sort` is `{field, order}`.
Cursors are opaque base64url tokens holding the sort key and position of an item; a cursor is
only valid with the sort it was issued for.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from aql_mcp.operations.models import Page
from aql_mcp.operations.results import VALIDATION_INVALID_TYPE, OperationError

OPERATORS = frozenset({"eq", "ne", "gt", "gte", "lt", "lte", "in", "contains", "exists"})
PHRASE = re.compile(r'"([^"]+)"|(\S+)')
MISSING = object()

Key = tuple[int, Any, int]
STORE_ORDER = ":asc"  # the sort id of a listing without `sort`: the order records were stored in


@dataclass(frozen=True, slots=True)
class Window:
    """The validated pagination request: `first`/`after` forward or `last`/`before` backward."""

    size: int
    forward: bool
    cursor: str | None


def window(
    first: int | None, after: str | None, last: int | None, before: str | None, *, default: int, cap: int
) -> Window:
    """The pagination window; invalid combinations refused (pagination.md §2.3), sizes clamped (§5.3)."""
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


def lookup(item: Mapping[str, Any], path: str) -> Any:
    value: Any = item
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return MISSING
        value = value[part]
    return value


def compile_filter(spec: Mapping[str, Any]) -> Callable[[Mapping[str, Any]], bool]:
    tests = [_condition(path, condition) for path, condition in spec.items()]
    return lambda item: all(test(item) for test in tests)


def _condition(path: str, condition: Any) -> Callable[[Mapping[str, Any]], bool]:
    if isinstance(condition, dict) and condition and set(condition) <= OPERATORS:
        checks = [_operator(op, operand, path) for op, operand in condition.items()]
        return lambda item: all(check(lookup(item, path)) for check in checks)
    if isinstance(condition, dict) and set(condition) & OPERATORS:
        unknown = sorted(set(condition) - OPERATORS)
        raise _bad_filter(path, f"unknown operator(s) {', '.join(unknown)}")
    return lambda item: lookup(item, path) == condition


def _operator(op: str, operand: Any, path: str) -> Callable[[Any], bool]:
    if op == "exists":
        return lambda value: (value is not MISSING) == bool(operand)
    if op == "eq":
        return lambda value: value == operand
    if op == "ne":
        return lambda value: value != operand
    if op == "in":
        if not isinstance(operand, list):
            raise _bad_filter(path, "'in' expects an array")
        return lambda value: value in operand
    if op == "contains":
        return lambda value: _contains(value, operand)
    return _ordering(op, operand, path)


def _ordering(op: str, operand: Any, path: str) -> Callable[[Any], bool]:
    if isinstance(operand, bool) or not isinstance(operand, (int, float, str)):
        raise _bad_filter(path, f"'{op}' expects a number or a string")
    compare: Callable[[Any, Any], bool] = {
        "gt": lambda a, b: a > b,
        "gte": lambda a, b: a >= b,
        "lt": lambda a, b: a < b,
        "lte": lambda a, b: a <= b,
    }[op]
    kind = str if isinstance(operand, str) else (int, float)
    return lambda value: isinstance(value, kind) and not isinstance(value, bool) and compare(value, operand)


def _contains(value: Any, operand: Any) -> bool:
    if isinstance(value, list):
        return operand in value
    if isinstance(value, str) and isinstance(operand, str):
        return operand.lower() in value.lower()
    return False


def _bad_filter(path: str, reason: str) -> OperationError:
    return OperationError(
        VALIDATION_INVALID_TYPE,
        f"Parameter 'filter.{path}' expected 'a value or an operator object', got an invalid condition: {reason}",
        {
            "param_name": f"filter.{path}",
            "expected_type": "value or {operator: operand}",
            "actual_type": "object",
            "operators": sorted(OPERATORS),
        },
    )


def compile_search(query: str) -> Callable[[Mapping[str, Any]], bool]:
    terms = [(phrase or word).lower() for phrase, word in PHRASE.findall(query)]
    if not terms:
        return lambda item: True
    return lambda item: any(term in text for text in _strings(item) for term in terms)


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value.lower()]
    if isinstance(value, Mapping):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def sort_key(item: Mapping[str, Any], field: str | None, seq: int) -> Key:
    """A total order over values of any JSON type: missing < booleans < numbers < strings < the rest."""
    value = lookup(item, field) if field else seq
    if value is MISSING or value is None:
        return (0, 0, seq)
    if isinstance(value, bool):
        return (1, int(value), seq)
    if isinstance(value, (int, float)):
        return (2, value, seq)
    if isinstance(value, str):
        return (3, value, seq)
    return (4, orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode(), seq)


def encode_cursor(key: Key, sort: str) -> str:
    raw = orjson.dumps({"k": list(key), "s": sort})
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str, sort: str, param: str) -> Key:
    try:
        raw = orjson.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        rank, value, seq = raw["k"]
        if raw["s"] != sort or not isinstance(rank, int) or not isinstance(seq, int):
            raise ValueError
    except (ValueError, TypeError, KeyError, binascii.Error, orjson.JSONDecodeError):
        raise OperationError(
            VALIDATION_INVALID_TYPE,
            f"Parameter '{param}' expected 'a cursor from pageInfo of the same query'",
            {"param_name": param, "expected_type": "cursor", "actual_type": "string"},
        ) from None
    return (rank, value, seq)


def paginate(keyed: list[tuple[Key, dict[str, Any]]], span: Window, sort_id: str, descending: bool) -> Page:
    """The window of the sorted records; `_seq` (the store position) is dropped from the items."""
    keys = [key for key, _ in keyed]
    start, stop = 0, len(keyed)
    if span.cursor is not None:
        mark = decode_cursor(span.cursor, sort_id, "after" if span.forward else "before")
        beyond: Callable[[Key], bool] = (lambda k: k < mark) if descending else (lambda k: k > mark)
        if span.forward:
            start = next((i for i, k in enumerate(keys) if beyond(k)), len(keys))
        else:
            stop = next((i for i, k in enumerate(keys) if beyond(k) or k == mark), len(keys))
    forward = range(start, min(start + span.size, stop))
    chosen = forward if span.forward else range(max(stop - span.size, start), stop)
    items = [{k: v for k, v in keyed[i][1].items() if k != "_seq"} for i in chosen]
    return Page(
        items=items,
        cursors=[encode_cursor(keys[i], sort_id) for i in chosen],
        has_next=(chosen.stop < len(keyed)) if chosen else stop < len(keyed),
        has_previous=chosen.start > 0 if chosen else start > 0,
        total_count=len(keyed),
    )
