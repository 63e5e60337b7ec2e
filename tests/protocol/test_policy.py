"""Scopes of an MCP-AQL operation: its own, its family's and its family tool's (issue 12)."""

from __future__ import annotations

from aql_mcp.auth.principal import Principal
from aql_mcp.protocol.policy import ScopeRules

CALLER = Principal(subject="s", scopes=frozenset({"mcp"}))


def test_a_family_tools_rule_binds_the_operation_whatever_tool_carries_it() -> None:
    rules = ScopeRules(tools={"mcp_aql_delete": ("admin",)}, operations={"delete_record": ("write",)})
    missing = rules.missing_for_operation(
        "delete_record", "delete", CALLER, family_tool="mcp_aql_delete", family_tool_exists=True
    )
    assert missing == ("write", "admin")


def test_an_explicit_family_tool_rule_binds_even_in_single_mode() -> None:
    rules = ScopeRules(tools={"mcp_aql_delete": ("admin",)})
    missing = rules.missing_for_operation(
        "delete_record", "delete", CALLER, family_tool="mcp_aql_delete", family_tool_exists=False
    )
    assert missing == ("admin",)


def test_the_wildcard_tool_rule_binds_family_tools_only_where_they_exist() -> None:
    rules = ScopeRules(tools={"*": ("admin",), "mcp_aql": ("basic",)})
    semantic = rules.missing_for_operation("x", "read", CALLER, family_tool="mcp_aql_read", family_tool_exists=True)
    single = rules.missing_for_operation("x", "read", CALLER, family_tool="mcp_aql_read", family_tool_exists=False)
    assert semantic == ("admin",)
    assert single == ()


def test_a_scope_needed_twice_is_named_once() -> None:
    rules = ScopeRules(tools={"mcp_aql_read": ("a",)}, families={"read": ("a", "b")}, operations={"*": ("b",)})
    assert rules.missing_for_operation("x", "read", CALLER, family_tool="mcp_aql_read", family_tool_exists=True) == (
        "b",
        "a",
    )
