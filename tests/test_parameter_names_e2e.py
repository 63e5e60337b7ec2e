"""A deprecated camelCase parameter through a real `aql-mcp serve`: the call runs, the envelope warns
with the snake_case name to use, and introspection publishes only that name (issue 22, item 1)."""

from __future__ import annotations

from pathlib import Path

from tests.support.aql import session
from tests.support.server import start_server


def test_a_camel_case_alias_runs_with_a_deprecation_warning_on_a_real_server(tmp_path: Path) -> None:
    with start_server(tmp_path, plugins=()) as server, session(server, subject="agent-1") as agent:
        started = agent.call("mcp_aql_execute", "execute_agent", element_name="builder", maxAutonomousSteps=1)
        details = agent.details("execute_agent")
        first = agent.call("mcp_aql_create", "record_execution_step", element_name="builder", next_action_hint="a")
        second = agent.call("mcp_aql_create", "record_execution_step", element_name="builder", next_action_hint="b")
    assert started["success"] is True
    [notice] = started["warnings"]
    assert notice["code"] == "DEPRECATION_WARNING"
    assert (notice["details"]["deprecated_param"], notice["details"]["replacement"]) == (
        "maxAutonomousSteps",
        "max_autonomous_steps",
    )
    names = {p["name"] for p in details["parameters"]}
    assert "max_autonomous_steps" in names
    assert "maxAutonomousSteps" not in names
    # The alias took effect: a limit of one step pauses the second.
    assert first["data"]["continue"] is True
    assert second["data"]["continue"] is False
