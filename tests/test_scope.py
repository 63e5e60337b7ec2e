"""The scope accessors (aql_mcp/scope.py): a header is read from a table built once per request,
and a layer that gives the scope another header list is read afresh, never from the old table."""

from __future__ import annotations

from typing import Any

from aql_mcp.scope import header


def test_the_first_value_of_a_header_and_none_for_a_missing_one() -> None:
    scope: dict[str, Any] = {"headers": [(b"x-one", b"1"), (b"x-one", b"2"), (b"x-latin", "é".encode("latin-1"))]}
    assert header(scope, b"x-one") == "1"
    assert header(scope, b"x-latin") == "é"
    assert header(scope, b"x-none") is None


def test_new_headers_in_the_scope_are_read_not_the_table_of_the_old_ones() -> None:
    scope: dict[str, Any] = {"headers": [(b"authorization", b"Bearer old")]}
    assert header(scope, b"authorization") == "Bearer old"
    scope["headers"] = [(b"authorization", b"Bearer new")]
    assert header(scope, b"authorization") == "Bearer new"
