"""A records listing as the engines receive it: typed conditions, search terms, a sort and a window.

The `records` plugin validates what the caller sent and builds a `Listing`; each engine compiles it
to SQL with its own dialect (`plugins/records/compiler.py`), so no listing reads a collection into Python.

Values keep their JSON types (docs/store.md, "Typed comparisons"): `true` never equals `1`, numbers
compare as numbers whatever their notation (`1` equals `1.0`), strings compare by code point, and an
ordering operator only matches values of its operand's kind. A sort orders every JSON type in one
total order, missing or null < booleans < numbers < strings < arrays < objects (arrays and objects
by kind only: no JSON text of them is the same on every engine), with the record's position in its
collection breaking ties; `Key` is a record's place in that order, which is what a cursor carries.
Case-insensitive matching folds as Python's `str.lower` does, on every engine.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass
from typing import Any, Literal

IndexType = Literal["string", "number"]
# The engine indexes this plugin owns carry this prefix (reconciling drops the ones nobody declares).
PREFIX = "records_ix_"
Operator = Literal["eq", "ne", "gt", "gte", "lt", "lte", "in", "contains", "exists"]
ORDERING: frozenset[str] = frozenset({"gt", "gte", "lt", "lte"})

# Fields every record has outside its data, stored as columns; a filter or sort on them reads the column.
SYSTEM_COLUMNS: dict[str, str] = {
    "id": "id",
    "collection": "collection",
    "_etag": "etag",
    "created_at": "created_at",
    "updated_at": "updated_at",
}

# Ranks of the sort order.
MISSING, BOOLEAN, NUMBER, STRING, COMPOSITE = 0, 1, 2, 3, 4
# The numbers a key may hold: what orjson reads as an integer (64 bits, signed or not) or a finite real.
KEY_INTEGERS = range(-(2**63), 2**64)
# Positions are 64-bit signed and never negative on either engine.
KEY_POSITIONS = range(0, 2**63)
# Text no engine can store, so no record's key holds it: NUL (PostgreSQL text refuses it) and lone surrogates.
UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


@dataclass(frozen=True, slots=True)
class Key:
    """A record's place in a listing's order: rank, numeric value, text value, position."""

    rank: int = MISSING
    number: int | float = 0
    text: str = ""
    position: int = 0


def key_from_json(raw: Any) -> Key | None:
    """The key a cursor carried as `[rank, number, text, position]`, or None when it is no key any
    listing could have produced. Every key this accepts, each engine can bind and compare (the store
    contract tests run this on both), so a forged cursor is a validation error, never an engine error."""
    if not isinstance(raw, list) or len(raw) != 4:
        return None
    rank, number, text, position = raw
    if type(rank) is not int or not MISSING <= rank <= COMPOSITE:
        return None
    if not (type(number) is int and number in KEY_INTEGERS) and not (type(number) is float and math.isfinite(number)):
        return None
    if not isinstance(text, str) or UNSTORABLE.search(text) is not None:
        return None
    if type(position) is not int or position not in KEY_POSITIONS:
        return None
    return Key(rank, number, text, position)


@dataclass(frozen=True, slots=True)
class Condition:
    """One test on the value at `path` (a system field when `path` is one of `SYSTEM_COLUMNS`)."""

    path: tuple[str, ...]
    op: Operator
    operand: Any

    @property
    def column(self) -> str | None:
        return column_of(self.path)


def column_of(path: tuple[str, ...]) -> str | None:
    """The column a system field is stored in; None for a path into the record's data."""
    return SYSTEM_COLUMNS.get(path[0]) if len(path) == 1 else None


@dataclass(frozen=True, slots=True)
class Index:
    """A declared index (indexes.py): the data field (dot path) and the JSON type whose values it holds."""

    path: tuple[str, ...]
    type: IndexType

    @property
    def field(self) -> str:
        return ".".join(self.path)

    @property
    def name(self) -> str:
        """The engine's index name: the same (field, type) gives the same name on every replica."""
        digest = hashlib.sha256(f"{self.type}:{self.field}".encode()).hexdigest()[:16]
        return f"{PREFIX}{self.type[0]}_{digest}"

    @property
    def rank(self) -> int:
        """The rank of this type's values in the listing order."""
        return STRING if self.type == "string" else NUMBER

    def wire(self) -> dict[str, str]:
        return {"field": self.field, "type": self.type}


@dataclass(frozen=True, slots=True)
class Listing:
    """What to list: every condition must hold, and any search term (when there are terms) must match."""

    size: int
    forward: bool = True
    cursor: Key | None = None  # the window starts after it (forward) or ends before it (backward)
    conditions: tuple[Condition, ...] = ()
    terms: tuple[str, ...] = ()
    sort: tuple[str, ...] | None = None
    descending: bool = False
    # The collection's declared indexes: conditions and a sort they answer read them (indexes.py).
    indexes: frozenset[Index] = frozenset()

    @property
    def is_plain(self) -> bool:
        """No filter, search or sort: the collection in store order, read as an index range."""
        return not self.conditions and not self.terms and self.sort is None
