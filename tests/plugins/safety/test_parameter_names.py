"""The safety loop's parameters under their snake_case names (MCP-AQL §4.3), with the camelCase names of
the §8.6.3 and §8.7.4 tables as deprecated aliases (ADR-003; issue 22, item 1; docs/aql.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.operations.client import RECORDS, Aql, aql_session, records_settings

pytestmark = pytest.mark.anyio
SAFETY = "aql_mcp.plugins.safety:plugin"
ALIASES = {
    "execute_agent": {
        "maxAutonomousSteps": "max_autonomous_steps",
        "riskTolerance": "risk_tolerance",
        "requiresApproval": "requires_approval",
    },
    "record_execution_step": {"stepDescription": "step_description", "nextActionHint": "next_action_hint"},
}


def _settings(state: Path, **safety: Any) -> Any:
    settings = records_settings(state, safety=safety)
    return settings.model_copy(update={"server": settings.server.model_copy(update={"plugins": (RECORDS, SAFETY)})})


def _deprecations(result: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        (w["details"]["deprecated_param"], w["details"]["replacement"])
        for w in result.get("warnings", ())
        if w["code"] == "DEPRECATION_WARNING"
    ]


async def _run(aql: Aql, **params: Any) -> dict[str, Any]:
    started = await aql.call("mcp_aql_execute", "execute_agent", element_name="builder", **params)
    assert started["success"], started
    return started


async def test_the_snake_case_names_tighten_the_policy_without_warnings(tmp_path: Path) -> None:
    async with aql_session(_settings(tmp_path, max_autonomous_steps=9)) as aql:
        started = await _run(aql, max_autonomous_steps=2, risk_tolerance="conservative", requires_approval=["rm *"])
        step = await aql.call(
            "mcp_aql_create",
            "record_execution_step",
            element_name="builder",
            step_description="looked around",
            next_action_hint="rm -rf build",
        )
    assert (started["data"]["maxAutonomousSteps"], started["data"]["riskTolerance"]) == (2, "conservative")
    assert "warnings" not in started
    assert step["success"] is True
    assert "warnings" not in step
    assert step["data"]["continue"] is False  # requires_approval matched: a human decides


async def test_the_camel_case_names_still_work_with_a_warning_naming_the_one_to_use(tmp_path: Path) -> None:
    async with aql_session(_settings(tmp_path, max_autonomous_steps=9)) as aql:
        started = await _run(aql, maxAutonomousSteps=2, riskTolerance="conservative", requiresApproval=["rm *"])
        step = await aql.call(
            "mcp_aql_create",
            "record_execution_step",
            element_name="builder",
            stepDescription="looked around",
            nextActionHint="rm -rf build",
        )
    assert (started["data"]["maxAutonomousSteps"], started["data"]["riskTolerance"]) == (2, "conservative")
    assert sorted(_deprecations(started)) == sorted(ALIASES["execute_agent"].items())
    assert sorted(_deprecations(step)) == sorted(ALIASES["record_execution_step"].items())
    assert step["data"]["continue"] is False


async def test_both_spellings_of_one_parameter_are_refused_naming_both(tmp_path: Path) -> None:
    async with aql_session(_settings(tmp_path)) as aql:
        started = await aql.call(
            "mcp_aql_execute", "execute_agent", element_name="builder", max_autonomous_steps=2, maxAutonomousSteps=3
        )
        await _run(aql)
        step = await aql.call(
            "mcp_aql_create", "record_execution_step", element_name="builder", next_action_hint="a", nextActionHint="b"
        )
    assert started["error"]["code"] == step["error"]["code"] == "VALIDATION_INVALID_TYPE"
    assert started["error"]["details"]["conflicting_params"] == ["max_autonomous_steps", "maxAutonomousSteps"]
    assert step["error"]["details"]["conflicting_params"] == ["next_action_hint", "nextActionHint"]


async def test_introspection_publishes_snake_case_names_and_the_deprecated_aliases(tmp_path: Path) -> None:
    async with aql_session(_settings(tmp_path, max_autonomous_steps=7)) as aql:
        details = {
            name: await aql.call("mcp_aql_read", "introspect", query="operations", name=name) for name in ALIASES
        }
    for name, aliases in ALIASES.items():
        parameters = {p["name"]: p for p in details[name]["data"]["operation"]["parameters"]}
        assert not set(aliases) & set(parameters)
        for alias, published in aliases.items():
            assert f"Deprecated alias: '{alias}'" in parameters[published]["description"]
    execute = {p["name"]: p for p in details["execute_agent"]["data"]["operation"]["parameters"]}
    assert execute["max_autonomous_steps"]["default"] == 7
    example = details["record_execution_step"]["data"]["operation"]["examples"][0]["request"]
    assert "next_action_hint" in example["params"]
