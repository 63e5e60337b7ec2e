"""JSON in SQLite: JSON1's `json_type` keeps the types apart that `json_extract` merges (it reads
`true` as 1), so every test checks the type before the value.

Objects and arrays compare through `aql_json_equal`, a function the engine registers on each of its
connections (store/sqlite/functions.py); case-insensitive matching uses `aql_fold`, Python's
`str.lower`, because SQLite's own `lower()` folds ASCII only.
"""

from __future__ import annotations

from typing import Any

import orjson

from aql_mcp.plugins.records.compiler import Statement
from aql_mcp.plugins.records.listing import Index, Key

INT64 = range(-(2**63), 2**63)


class SqliteDialect:
    text_order = ""
    # Without statistics of bound values, SQLite would read the (tenant, collection, pos) index for its
    # order and test every record; `+pos` is no column, so no index offers that order, and the
    # declared index's range wins.
    served_position = "+pos"

    def placeholder(self, index: int) -> str:
        return f"?{index}"

    def where(self, test: str) -> str:
        # SQLite evaluates an AND inside a function's argument in full, but short-circuits it in a CASE
        # condition: a cheap first test (instr) then spares the JSON parsing of the others.
        return f"CASE WHEN {test} THEN TRUE ELSE FALSE END"

    def path(self, segments: tuple[str, ...]) -> str:
        # Keys escaped as orjson wrote them into `data`: SQLite matches a label against the key's
        # JSON text (3.40 compares them raw; 3.45+ decodes a label holding a backslash).
        return "$" + "".join("." + orjson.dumps(segment).decode() for segment in segments)

    def exists(self, path: str) -> str:
        return f"json_type(data, {path}) IS NOT NULL"

    def equals(self, statement: Statement, segments: tuple[str, ...], value: Any) -> str:
        path = statement.bind(self.path(segments))
        test = _typed_equal(statement, f"json_type(data, {path})", f"json_extract(data, {path})", value)
        needle = _needle(value)
        if needle is None:
            return test
        return f"instr(data, {statement.bind(needle)}) > 0 AND {test}"

    def contains(self, statement: Statement, path: str, value: Any) -> str:
        element = _typed_equal(statement, "e.type", "e.value", value)
        elements = f"SELECT 1 FROM json_each(data, {path}) AS e WHERE {element}"  # noqa: S608
        in_array = f"(json_type(data, {path}) = 'array' AND EXISTS ({elements}))"
        if not isinstance(value, str):
            return in_array
        needle = statement.bind(value.lower())
        in_text = f"(json_type(data, {path}) = 'text' AND instr(aql_fold(json_extract(data, {path})), {needle}) > 0)"
        return f"{in_text} OR {in_array}"

    def compare(self, statement: Statement, path: str, op: str, value: Any) -> str:
        kinds = "'text'" if isinstance(value, str) else "'integer', 'real'"
        operand = statement.bind(value if isinstance(value, str) else _number(value))
        return f"json_type(data, {path}) IN ({kinds}) AND json_extract(data, {path}) {op} {operand}"

    def fold(self, expression: str) -> str:
        return f"aql_fold({expression})"

    def has_substring(self, haystack: str, needle: str) -> str:
        return f"instr({haystack}, {needle}) > 0"

    def search(self, statement: Statement, terms: tuple[str, ...]) -> str:
        bound = [statement.bind(term) for term in terms]
        matches = " OR ".join(f"instr(aql_fold(t.value), {term}) > 0" for term in bound)
        exact = f"EXISTS (SELECT 1 FROM json_tree(data) AS t WHERE t.type = 'text' AND ({matches}))"  # noqa: S608
        if any(_escaped_in_json(term) for term in terms):
            return exact
        # A record whose JSON text holds no term cannot hold it in a string value: that cheap test on
        # the whole document skips walking the tree of most records.
        anywhere = " OR ".join(f"instr(aql_fold(data), {term}) > 0" for term in bound)
        return f"({anywhere}) AND {exact}"

    def sort_key(self, path: str) -> tuple[str, str, str]:
        kind, value = f"json_type(data, {path})", f"json_extract(data, {path})"
        rank = (
            f"CASE {kind} WHEN 'true' THEN 1 WHEN 'false' THEN 1 WHEN 'integer' THEN 2 WHEN 'real' THEN 2 "
            "WHEN 'text' THEN 3 WHEN 'object' THEN 4 WHEN 'array' THEN 4 ELSE 0 END"
        )
        number = f"CASE {kind} WHEN 'true' THEN 1 WHEN 'integer' THEN {value} WHEN 'real' THEN {value} ELSE 0 END"
        text = f"CASE {kind} WHEN 'text' THEN {value} WHEN 'array' THEN '[' WHEN 'object' THEN '{{' ELSE '' END"
        return rank, number, text

    def key_row(self, statement: Statement, key: Key) -> str:
        bound = (key.rank, _number(key.number), key.text, key.position)
        return "(" + ", ".join(statement.bind(value) for value in bound) + ")"

    def index_expression(self, index: Index) -> str:
        # The path is a literal: SQLite matches an index's expression to the query's token for token,
        # and a bound parameter matches nothing (index fields are plain identifiers, indexes.py).
        path = "'" + self.path(index.path).replace("'", "''") + "'"
        kinds = "'text'" if index.type == "string" else "'integer', 'real'"
        return f"CASE WHEN json_type(data, {path}) IN ({kinds}) THEN json_extract(data, {path}) END"

    def index_operand(self, statement: Statement, index: Index, value: Any) -> str:
        return statement.bind(value if index.type == "string" else _number(value))


def _typed_equal(statement: Statement, kind: str, value: str, operand: Any) -> str:
    if operand is None:
        return f"{kind} = 'null'"
    if isinstance(operand, bool):
        return f"{kind} = '{'true' if operand else 'false'}'"
    if isinstance(operand, int | float):
        return f"{kind} IN ('integer', 'real') AND {value} = {statement.bind(_number(operand))}"
    if isinstance(operand, str):
        return f"{kind} = 'text' AND {value} = {statement.bind(operand)}"
    operand_json = statement.bind(orjson.dumps(operand))
    # CASE, not AND: SQLite may evaluate both sides of an AND, and only these kinds are JSON text.
    return f"CASE WHEN {kind} IN ('object', 'array') THEN aql_json_equal({value}, {operand_json}) ELSE FALSE END"


def _needle(value: Any) -> bytes | None:
    """Bytes every record holding `value` has in its stored JSON (orjson wrote it): a string, boolean
    or null as orjson writes it; an integer's digits, which its float spelling (`5.0`) also holds.
    A cheap scan for them spares parsing most records."""
    if isinstance(value, str | bool) or value is None:
        return orjson.dumps(value)
    if isinstance(value, int) and abs(value) < 2**53:
        return str(value).encode()
    return None


def _escaped_in_json(term: str) -> bool:
    """Whether JSON text writes `term` other than as itself (quotes, backslashes, control characters)."""
    return any(c in term for c in '"\\') or any(ord(c) < 0x20 for c in term)


def _number(value: int | float) -> int | float:
    """SQLite integers are 64-bit; a larger JSON integer compares as the real it is closest to."""
    return value if not isinstance(value, int) or value in INT64 else float(value)
