"""One compiler from a `Listing` to SQL, with a `Dialect` per engine for the JSON expressions.

The compiler owns the shape every engine shares: the tenant and collection scope, conditions joined
with AND, search terms with OR, the sort key as three columns (rank, number, text) plus the record's
position, keyset pagination on that key, and the query that tells whether anything lies on the
other side of a cursor. A dialect only says how its engine reads a typed JSON value. Every value a
caller sent is a bound parameter; paths are bound too, never spliced into the SQL.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from aql_mcp.plugins.records.indexes import served, serving, sort_index
from aql_mcp.plugins.records.listing import MISSING, STRING, Condition, Index, Key, Listing, column_of


@dataclass(slots=True)
class Statement:
    """SQL text being built and the parameters it binds, in order."""

    dialect: Dialect
    params: list[Any] = field(default_factory=list)

    def bind(self, value: Any) -> str:
        self.params.append(value)
        return self.dialect.placeholder(len(self.params))


class Dialect(Protocol):
    """How one engine tests and orders the JSON value at a path of a record's `data`."""

    text_order: str  # appended to text expressions in comparisons and ORDER BY (code point order)
    # The store order's ORDER BY term when a declared index narrows the listing (the index's range
    # then comes first, and its few records are sorted by position).
    served_position: str

    def where(self, test: str) -> str:
        """`test` as one term of the WHERE clause, where NULL already reads as false: how this engine
        evaluates it best (SQLite: inside CASE, which short-circuits; PostgreSQL: bare, so an index
        can serve it)."""
        ...

    def placeholder(self, index: int) -> str: ...
    def path(self, segments: tuple[str, ...]) -> Any:
        """The bound form of a path."""
        ...

    def exists(self, path: str) -> str: ...
    def equals(self, statement: Statement, segments: tuple[str, ...], value: Any) -> str:
        """Typed equality with the value at `segments` (the dialect binds the path if it needs it)."""
        ...

    def contains(self, statement: Statement, path: str, value: Any) -> str: ...
    def compare(self, statement: Statement, path: str, op: str, value: Any) -> str: ...
    def fold(self, expression: str) -> str:
        """Lower-cased text, for case-insensitive matching."""
        ...

    def has_substring(self, haystack: str, needle: str) -> str: ...

    def search(self, statement: Statement, terms: tuple[str, ...]) -> str: ...
    def sort_key(self, path: str) -> tuple[str, str, str]:
        """Rank, number and text expressions of the value at `path` (listing.py's total order)."""
        ...

    def key_row(self, statement: Statement, key: Key) -> str: ...
    def index_expression(self, index: Index) -> str:
        """The typed value an index holds, written exactly as the index is built (indexes.py)."""
        ...

    def index_operand(self, statement: Statement, index: Index, value: Any) -> str:
        """`value` bound with the type of `index_expression`, so the comparison can read the index."""
        ...


_OPERATORS = {"gt": ">", "gte": ">=", "lt": "<", "lte": "<="}


@dataclass(frozen=True, slots=True)
class Compiled:
    sql: str
    params: list[Any]


def page_query(listing: Listing, dialect: Dialect, columns: str, scope: tuple[str, str]) -> Compiled:
    """At most `size + 1` records of the window in travel order (the extra one says there is more)."""
    statement = Statement(dialect)
    inner = _filtered(listing, statement, columns, scope)
    descending = listing.descending != (not listing.forward)
    order = "DESC" if descending else "ASC"
    where = ""
    if listing.cursor is not None:
        where = f" WHERE {_beyond(listing, statement, '<' if descending else '>')}"
    ordering = f"k_rank {order}, k_number {order}, k_text{dialect.text_order} {order}, pos {order}"
    index = sort_index(listing)
    if index is not None:
        # One rank only (the condition the index serves): its typed value and the position are the
        # whole order, the index's own order after (tenant, collection).
        ordering = f"{_index_column(index)} {order}, pos {order}"
    if listing.sort is None:
        # Store order: the (tenant, collection, pos) index gives it, with no sort step, and a
        # matching page can stop the scan early.
        ordering = f"{dialect.served_position if served(listing) else 'pos'} {order}"
    sql = f"SELECT * FROM ({inner}) AS listed{where} ORDER BY {ordering} LIMIT {statement.bind(listing.size + 1)}"  # noqa: S608
    return Compiled(sql, statement.params)


def beyond_query(listing: Listing, dialect: Dialect, scope: tuple[str, str]) -> Compiled | None:
    """Whether a matching record lies behind the cursor (before the window going forward); None
    without a cursor, where nothing can."""
    if listing.cursor is None:
        return None
    statement = Statement(dialect)
    inner = _filtered(listing, statement, "pos", scope)
    descending = listing.descending != (not listing.forward)
    condition = _beyond(listing, statement, ">=" if descending else "<=")
    sql = f"SELECT EXISTS (SELECT 1 FROM ({inner}) AS listed WHERE {condition})"  # noqa: S608
    return Compiled(sql, statement.params)


def _beyond(listing: Listing, statement: Statement, comparison: str) -> str:
    """The keyset condition: records on the `comparison` side of the cursor, in listing order."""
    assert listing.cursor is not None
    if listing.sort is None:
        return f"pos {comparison} {statement.bind(listing.cursor.position)}"
    dialect = statement.dialect
    index = sort_index(listing)
    if index is not None:
        cursor = listing.cursor
        value = dialect.index_operand(statement, index, cursor.text if index.type == "string" else cursor.number)
        return f"({_index_column(index)}, pos) {comparison} ({value}, {statement.bind(cursor.position)})"
    row = dialect.key_row(statement, listing.cursor)
    return f"(k_rank, k_number, k_text{dialect.text_order}, pos) {comparison} {row}"


def _index_column(index: Index) -> str:
    return "k_text" if index.type == "string" else "k_number"


def _filtered(listing: Listing, statement: Statement, columns: str, scope: tuple[str, str]) -> str:
    dialect = statement.dialect
    clauses = [f"tenant = {statement.bind(scope[0])}", f"collection = {statement.bind(scope[1])}"]
    clauses += [_condition(condition, statement, listing.indexes) for condition in listing.conditions]
    if listing.terms:
        clauses.append(dialect.search(statement, listing.terms))
    rank, number, text = _sort_key(listing, statement)
    select = f"SELECT {columns}, {rank} AS k_rank, {number} AS k_number, {text} AS k_text FROM records"  # noqa: S608
    return f"{select} WHERE {' AND '.join(clauses)}"


def _sort_key(listing: Listing, statement: Statement) -> tuple[str, str, str]:
    if listing.sort is None:
        return (str(MISSING), "0", "''")
    dialect = statement.dialect
    index = sort_index(listing)
    if index is not None:
        value = dialect.index_expression(index)
        return (str(index.rank), "0", value) if index.type == "string" else (str(index.rank), value, "''")
    column = column_of(listing.sort)
    if column is not None:
        return (str(STRING), "0", column)
    return dialect.sort_key(statement.bind(dialect.path(listing.sort)))


def _condition(condition: Condition, statement: Statement, indexes: frozenset[Index]) -> str:
    """One term of the WHERE clause, where NULL reads as false; a test under NOT is made definite
    first (`_definite`), so NOT too behaves as two-valued logic. A test an index serves is written
    bare, as the index's expression, where the planner sees it (NULL, another type, reads false)."""
    index = serving(condition, indexes)
    if index is not None:
        return _indexed_test(condition, index, statement)
    test = _column_test(condition, statement) if condition.column else _data_test(condition, statement)
    return statement.dialect.where(test)


def _indexed_test(condition: Condition, index: Index, statement: Statement) -> str:
    dialect = statement.dialect
    expression = dialect.index_expression(index)
    if condition.op == "in":
        values = ", ".join(dialect.index_operand(statement, index, value) for value in condition.operand)
        return f"({expression} IN ({values}))"
    comparison = "=" if condition.op == "eq" else _OPERATORS[condition.op]
    return f"({expression} {comparison} {dialect.index_operand(statement, index, condition.operand)})"


def _definite(test: str) -> str:
    """`test`, with NULL read as false. CASE rather than coalesce(): SQLite evaluates an AND inside a
    function's argument in full, but short-circuits it in a CASE condition (a cheap first test then
    spares the JSON parsing of the others)."""
    return f"CASE WHEN {test} THEN TRUE ELSE FALSE END"


def _data_test(condition: Condition, statement: Statement) -> str:
    dialect, op, operand = statement.dialect, condition.op, condition.operand
    if op in ("eq", "ne"):
        test = dialect.equals(statement, condition.path, operand)
        return test if op == "eq" else f"NOT {_definite(test)}"
    if op == "in":
        # Only ever a whole WHERE term, never negated: NULL alternatives read as false there.
        tests = [dialect.where(dialect.equals(statement, condition.path, v)) for v in operand]
        return " OR ".join(tests) or "FALSE"
    path = statement.bind(dialect.path(condition.path))
    if op == "exists":
        return dialect.exists(path) if operand else f"NOT {dialect.exists(path)}"
    if op == "contains":
        return dialect.contains(statement, path, operand)
    return dialect.compare(statement, path, _OPERATORS[op], operand)


def _column_test(condition: Condition, statement: Statement) -> str:
    """System fields are strings in columns: a test with an operand of another type never matches."""
    column, op, operand = condition.column, condition.op, condition.operand
    text_order = statement.dialect.text_order
    if op == "exists":
        return "TRUE" if operand else "FALSE"
    if op == "in":
        values = [statement.bind(v) for v in operand if isinstance(v, str)]
        return f"{column} IN ({', '.join(values)})" if values else "FALSE"
    if op == "ne":
        return f"{column} <> {statement.bind(operand)}" if isinstance(operand, str) else "TRUE"
    if not isinstance(operand, str):
        return "FALSE"
    if op == "eq":
        return f"{column} = {statement.bind(operand)}"
    if op == "contains":
        dialect = statement.dialect
        return dialect.has_substring(dialect.fold(str(column)), statement.bind(operand.lower()))
    return f"{column}{text_order} {_OPERATORS[op]} {statement.bind(operand)}"
