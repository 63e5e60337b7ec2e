"""scripts/token_cost.py: the token cost of `tools/list` per MCP-AQL endpoint mode (MCP-AQL Appendix A).

The script is measured once, in-process (about a second); these tests check what must hold whatever
the tokenizer counts, never the numbers themselves.
"""

from __future__ import annotations

import pytest
from scripts.token_cost import CONFIGURATIONS, RESERVED, Report, listed_operations, measure, render, without_operation


@pytest.fixture(scope="module")
def report() -> Report:
    return measure()


def test_single_mode_costs_less_than_semantic_mode_which_costs_less_than_discrete_tools(report: Report) -> None:
    """MCP-AQL Appendix A.1 and MCP-AQL endpoint modes §2.3: single < semantic < discrete."""
    discrete = report.discrete
    for profile in ("crude", "dqmo"):
        semantic = report.mode("semantic", profile)
        assert report.mode("single").tokens < semantic.tokens < discrete.tokens
        assert report.mode("single").model_tokens < semantic.model_tokens < discrete.model_tokens


def test_every_mode_lists_every_operation_once_per_tool_set(report: Report) -> None:
    """MCP-AQL endpoint modes §3.1: `all` registers the family tools plus the unified one, so each operation twice."""
    names = {op.name for op in report.operations}
    assert "introspect" in names
    assert len(report.modes) == len(CONFIGURATIONS)
    for listing in report.modes:
        assert set(listing.mentions) == names, (listing.mode, listing.profile)
        assert set(listing.mentions.values()) == {listing.surfaces}, (listing.mode, listing.profile)
        assert listing.surfaces == (2 if listing.mode == "all" else 1)
    assert [t["name"] for t in report.mode("single").tools] == ["mcp_aql"]


def test_the_discrete_baseline_has_one_tool_per_operation_but_introspect(report: Report) -> None:
    tools = report.discrete.tools
    assert sorted(t["name"] for t in tools) == sorted(op.name for op in report.operations if op.name not in RESERVED)
    assert set(report.discrete.mentions.values()) == {1}
    for tool, op in zip(tools, (op for op in report.operations if op.name not in RESERVED), strict=True):
        schema = tool["inputSchema"]
        assert schema["type"] == "object"
        assert schema["additionalProperties"] is False
        assert set(schema["properties"]) == {p["name"] for p in op.detail["parameters"]}
        assert schema["required"] == [p["name"] for p in op.detail["parameters"] if p["required"]]


def test_every_count_is_positive(report: Report) -> None:
    for listing in (report.discrete, *report.modes):
        assert listing.tools
        assert listing.tokens > 0
        assert listing.model_tokens > 0
        assert listing.size > 0
        assert all(cost > 0 for cost in listing.marginal.values()), (listing.mode, listing.marginal)
        assert 0 < listing.fixed() < listing.tokens
        assert listing.estimate(report.target) > listing.tokens
    assert all(op.introspect_tokens > 0 for op in report.operations)


def test_leaving_an_operation_out_takes_it_off_every_endpoint_tool_and_keeps_the_tools(report: Report) -> None:
    listing = report.mode("all", "crude")
    for op in report.operations:
        tools = without_operation(listing.tools, op.name)
        assert [t["name"] for t in tools] == [t["name"] for t in listing.tools]
        assert all(op.name not in listed_operations(t["description"]) for t in tools)
        assert all(f"- {op.name} [" not in t["description"] for t in tools)


def test_the_report_sets_every_configuration_beside_the_spec_table(report: Report) -> None:
    text = render(report, ".venv/bin/python scripts/token_cost.py")
    for spec_tokens in ("~29,600", "~4,300", "~1,100"):
        assert spec_tokens in text
    assert "anthropic-tokenizer" in text
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    for _label, mode, profile in CONFIGURATIONS:
        assert any(f"| {mode} | {profile} |" in row for row in rows), (mode, profile)
    assert any(row.startswith("| Discrete tools | discrete |") for row in rows)
