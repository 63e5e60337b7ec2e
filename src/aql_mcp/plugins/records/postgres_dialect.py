"""JSON in PostgreSQL: JSONB keeps JSON's types (`'true'::jsonb` is not `'1'::jsonb`, `1` equals
`1.0`), so equality compares JSONB values, and an equality on a scalar is written as containment
(`data @> '{"a": {"b": 1}}'`), which the GIN `jsonb_path_ops` index on `records.data` serves.

A value is read with a strict JSON path (`strict $."a"."b"`, errors silenced): a key missing, or a
path through an array or a scalar, is SQL NULL, exactly as SQLite's `$."a"."b"` and the listing
rules have it. Set-returning functions sit behind CASE: PostgreSQL does not promise to evaluate
the left side of an AND first.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from aql_mcp.plugins.records.compiler import Statement
from aql_mcp.plugins.records.listing import Index, Key


class PostgresDialect:
    text_order = ' COLLATE "C"'
    # The planner weighs both indexes with the values bound (statistics of the indexed expression).
    served_position = "pos"

    def placeholder(self, index: int) -> str:
        return f"${index}"

    def where(self, test: str) -> str:
        # Bare: inside CASE or coalesce() the planner cannot see `data @> ...`, and the GIN index
        # on `data` would never serve an equality.
        return f"({test})"

    def path(self, segments: tuple[str, ...]) -> str:
        return "strict $" + "".join("." + json.dumps(segment) for segment in segments)

    def exists(self, path: str) -> str:
        # Not jsonb_path_exists: silenced errors (a missing key in strict mode) make it NULL, not false.
        return f"{_value(path)} IS NOT NULL"

    def equals(self, statement: Statement, segments: tuple[str, ...], value: Any) -> str:
        if isinstance(value, dict | list):
            path = statement.bind(self.path(segments))
            return f"{_value(path)} = {statement.bind(json.dumps(value))}::jsonb"
        nested: Any = value
        for segment in reversed(segments):
            nested = {segment: nested}
        return f"data @> {statement.bind(json.dumps(nested))}::jsonb"

    def contains(self, statement: Statement, path: str, value: Any) -> str:
        found = _value(path)
        element = statement.bind(json.dumps(value))
        elements = f"SELECT 1 FROM jsonb_array_elements({found}) AS e(x) WHERE x = {element}::jsonb"  # noqa: S608
        in_array = f"CASE WHEN jsonb_typeof({found}) = 'array' THEN EXISTS ({elements}) ELSE FALSE END"
        if not isinstance(value, str):
            return in_array
        needle = statement.bind(value.lower())
        folded = _fold(f"{found} #>> '{{}}'")
        in_text = f"CASE WHEN jsonb_typeof({found}) = 'string' THEN strpos({folded}, {needle}) > 0 ELSE FALSE END"
        return f"({in_text}) OR ({in_array})"

    def compare(self, statement: Statement, path: str, op: str, value: Any) -> str:
        found = _value(path)
        if isinstance(value, str):
            operand = statement.bind(value)
            return (
                f"CASE WHEN jsonb_typeof({found}) = 'string' "
                f"THEN ({found} #>> '{{}}') COLLATE \"C\" {op} {operand}::text ELSE FALSE END"
            )
        operand = statement.bind(json.dumps(value))
        return f"CASE WHEN jsonb_typeof({found}) = 'number' THEN {found} {op} {operand}::jsonb ELSE FALSE END"

    def fold(self, expression: str) -> str:
        return _fold(expression)

    def has_substring(self, haystack: str, needle: str) -> str:
        return f"strpos({haystack}, {needle}) > 0"

    def search(self, statement: Statement, terms: tuple[str, ...]) -> str:
        value = _fold("v.x #>> '{}'")
        matches = " OR ".join(f"strpos({value}, {statement.bind(term)}) > 0" for term in terms)
        strings = "jsonb_path_query(data, 'strict $.**')"
        exact = f"EXISTS (SELECT 1 FROM {strings} AS v(x) WHERE jsonb_typeof(v.x) = 'string' AND ({matches}))"  # noqa: S608
        if any(c in term for term in terms for c in '"\\') or any(ord(c) < 0x20 for term in terms for c in term):
            return exact
        # The document's text holds every string value as itself (bar escapes, excluded above): a
        # record whose text holds no term is skipped without walking its tree.
        document = _fold("data::text")
        anywhere = " OR ".join(f"strpos({document}, {statement.bind(term)}) > 0" for term in terms)
        return f"({anywhere}) AND {exact}"

    def sort_key(self, path: str) -> tuple[str, str, str]:
        found = _value(path)
        kind = f"jsonb_typeof({found})"
        rank = (
            f"CASE {kind} WHEN 'boolean' THEN 1 WHEN 'number' THEN 2 WHEN 'string' THEN 3 "
            "WHEN 'object' THEN 4 WHEN 'array' THEN 4 ELSE 0 END"
        )
        number = (
            f"CASE {kind} WHEN 'number' THEN ({found} #>> '{{}}')::numeric "
            f"WHEN 'boolean' THEN CASE WHEN {found} = 'true'::jsonb THEN 1 ELSE 0 END ELSE 0 END::numeric"
        )
        # Objects and arrays by their kind only ('[' before '{'): no engine-neutral JSON text exists
        # (jsonb reorders keys and respells numbers), and a cursor should not carry a whole document.
        text = (
            f"CASE {kind} WHEN 'string' THEN {found} #>> '{{}}' "
            "WHEN 'array' THEN '[' WHEN 'object' THEN '{' ELSE '' END"
        )
        return rank, number, text

    def key_row(self, statement: Statement, key: Key) -> str:
        rank, number = statement.bind(key.rank), statement.bind(Decimal(repr(key.number)))
        text, position = statement.bind(key.text), statement.bind(key.position)
        return f"({rank}::int, {number}::numeric, {text}::text, {position}::bigint)"

    def index_expression(self, index: Index) -> str:
        # Immutable operators only (an index needs them), the path a text-array literal of plain
        # identifiers (indexes.py): none reads as an array position, as in the strict JSON path.
        path = "'{" + ",".join(index.path) + "}'"
        if index.type == "string":
            # Byte order, the listing order of strings (COLLATE "C" everywhere else too).
            return f"((CASE WHEN jsonb_typeof(data #> {path}) = 'string' THEN data #>> {path} END) COLLATE \"C\")"
        return f"(CASE WHEN jsonb_typeof(data #> {path}) = 'number' THEN (data #>> {path})::numeric END)"

    def index_operand(self, statement: Statement, index: Index, value: Any) -> str:
        if index.type == "string":
            return f"{statement.bind(value)}::text"
        return f"{statement.bind(Decimal(repr(value)))}::numeric"


def _value(path: str) -> str:
    return f"jsonb_path_query_first(data, ({path}::text)::jsonpath, '{{}}'::jsonb, true)"


def _fold(text: str) -> str:
    """Lower-cased as Python's `str.lower` does it (the operand's and the search terms' folding): ICU's
    root locale, whatever the database's LC_CTYPE or the column's collation ("C" folds ASCII only)."""
    return f'lower(({text}) COLLATE "und-x-icu")'
