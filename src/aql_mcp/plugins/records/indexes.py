"""Declared indexes of a collection: which data fields a listing reads through an expression index
(docs/store.md, "Indexed fields").

A collection declares an index on a data field and a JSON type (`string` or `number`). The engine
keeps one expression index per (field, type) on the records table, over `(tenant, collection,
<typed value>, pos)`, shared by every collection that declares that pair: the typed value is the
field's value when it has that type and NULL otherwise, so the index holds the exact answer of an
equality or a range with an operand of that type, and its order is the listing order of that type.
A condition the compiler serves from an index is written as exactly that expression, so the planner
of either engine finds it. Field names of indexes are plain identifiers, spliced into the index's
SQL as literals (an index cannot take a bound path); nothing else about them reaches the SQL.
"""

from __future__ import annotations

import re
from typing import Any

from aql_mcp.plugins.records.listing import Condition, Index, IndexType, Listing

INDEX_TYPES: tuple[IndexType, ...] = ("string", "number")
# Up to four dotted segments, each a letter then letters, digits or '_': no segment reads as an array
# position on either engine, and none needs quoting in a JSON path or a PostgreSQL text array.
INDEX_FIELD_PATTERN = r"^[A-Za-z][A-Za-z0-9_]{0,63}(\.[A-Za-z_][A-Za-z0-9_]{0,63}){0,3}$"
_FIELD = re.compile(INDEX_FIELD_PATTERN)
# The operators an index answers: the value's own comparisons (`ne`, `contains`, `exists` scan).
SERVED_OPERATORS = frozenset({"eq", "gt", "gte", "lt", "lte", "in"})


def valid_field(field: str) -> bool:
    return _FIELD.fullmatch(field) is not None


def index_of(field: str, kind: IndexType) -> Index:
    """The index of a declaration; checked again here, since its field is spliced into SQL (a row
    that did not come through the parameter models is refused, never built)."""
    if not valid_field(field) or kind not in INDEX_TYPES:
        raise ValueError(f"not an index declaration: {field!r} ({kind!r})")
    return Index(tuple(field.split(".")), kind)


def in_order(indexes: tuple[Index, ...]) -> tuple[Index, ...]:
    """Declarations in the order a collection lists them: by field, then type."""
    return tuple(sorted(indexes, key=lambda index: (index.field, index.type)))


def from_json(raw: Any) -> tuple[Index, ...]:
    """A collection's declared indexes as its read aggregates them (`[[field, type], ...]`)."""
    return tuple(index_of(field, kind) for field, kind in raw or ())


def type_of(value: Any) -> IndexType | None:
    """The index type that holds `value`: a string, or a number (booleans are not numbers here)."""
    if isinstance(value, str):
        return "string"
    if isinstance(value, int | float) and not isinstance(value, bool):
        return "number"
    return None


def serving(condition: Condition, indexes: frozenset[Index]) -> Index | None:
    """The declared index that answers `condition` exactly, or None (a scan tests it)."""
    if condition.column is not None or condition.op not in SERVED_OPERATORS or not indexes:
        return None
    operands = condition.operand if condition.op == "in" else [condition.operand]
    kinds = {type_of(operand) for operand in operands}
    if len(kinds) != 1:
        return None
    kind = kinds.pop()
    if kind is None:
        return None
    index = Index(condition.path, kind)
    return index if index in indexes else None


def sort_index(listing: Listing) -> Index | None:
    """The index that gives a listing's sort order: one that serves a condition on the sort field,
    so every record listed holds a value of the index's type there (one rank of the listing order)."""
    if listing.sort is None or not listing.indexes:
        return None
    for condition in listing.conditions:
        if condition.path == listing.sort:
            index = serving(condition, listing.indexes)
            if index is not None:
                return index
    return None


def served(listing: Listing) -> bool:
    """Whether an index narrows the listing: some condition reads an index range, not the collection."""
    return any(serving(condition, listing.indexes) is not None for condition in listing.conditions)


def unserved_fields(listing: Listing) -> list[str]:
    """The filter and sort fields no index serves, in the order the caller wrote them: what a scan
    tests (the id, unique in its collection, is always served by its own index)."""
    fields: list[str] = []
    for condition in listing.conditions:
        if condition.path == ("id",) and condition.op in ("eq", "in"):
            continue
        if serving(condition, listing.indexes) is None:
            fields.append(".".join(condition.path))
    if listing.sort is not None and sort_index(listing) is None:
        fields.append(".".join(listing.sort))
    return list(dict.fromkeys(fields))


def scans(listing: Listing) -> bool:
    """Whether the listing tests records no index answers: a filter or sort field no index serves
    (the listing's warning), or search terms (never indexed). It runs in the engine's scan slots,
    apart from every other call (`store.scan_concurrency`; docs/store.md, "Scan slots")."""
    return not listing.is_plain and (bool(listing.terms) or bool(unserved_fields(listing)))
