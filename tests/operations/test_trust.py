"""A plugin's trust is the operator's decision (MCP-AQL trust levels; issue 12)."""

from __future__ import annotations

from aql_mcp.operations.trust import describe_trust, effective_trust


def test_a_declared_trust_above_the_cap_is_lowered_to_it() -> None:
    assert effective_trust("p", "certified", ceiling="community_reviewed", overrides={}) == "community_reviewed"


def test_a_declared_trust_below_the_cap_is_kept() -> None:
    assert effective_trust("p", "generated", ceiling="community_reviewed", overrides={}) == "generated"


def test_the_operators_override_wins_above_or_below_the_cap() -> None:
    assert effective_trust("p", "untested", ceiling="validated", overrides={"p": "certified"}) == "certified"
    assert effective_trust("p", "certified", ceiling="certified", overrides={"p": "untested"}) == "untested"
    assert effective_trust("q", "certified", ceiling="validated", overrides={"p": "untested"}) == "validated"


def test_introspection_names_the_declared_level_when_it_is_not_the_one_in_force() -> None:
    assert describe_trust("validated", "validated") == "validated"
    assert "certified" in describe_trust("validated", "certified")
