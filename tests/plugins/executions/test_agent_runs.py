"""Agent runs through the executions plugin's lifecycle operations, in process with the records,
executions and safety plugins (MCP-AQL §8.4; docs/executions.md, "Agent runs"): one id format, one
`execution_id` parameter, `kind`, the core state, cancellation and what is refused."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from aql_mcp.plugins.safety.store import AgentRun
from aql_mcp.store.factory import open_store
from tests.operations.client import RECORDS, Aql, aql_session, records_settings
from tests.support.plugin_store import with_built_ins

pytestmark = pytest.mark.anyio
EXECUTIONS = "aql_mcp.plugins.executions:plugin"
SAFETY = "aql_mcp.plugins.safety:plugin"
ID = re.compile(r"exec_[0-9a-f]{24}")
READ, EXECUTE = "mcp_aql_read", "mcp_aql_execute"


def _settings(state: Path, **safety: Any) -> Any:
    settings = records_settings(state, safety=safety)
    plugins = (RECORDS, EXECUTIONS, SAFETY)
    return settings.model_copy(update={"server": settings.server.model_copy(update={"plugins": plugins})})


async def _data(aql: Aql, tool: str, operation: str, **params: Any) -> dict[str, Any]:
    result = await aql.call(tool, operation, **params)
    assert result["success"], result
    return dict(result["data"])


async def test_an_agent_run_has_the_one_id_format_and_get_and_list_executions_show_it_with_its_kind(
    tmp_path: Path,
) -> None:
    async with aql_session(_settings(tmp_path)) as aql:
        await aql.call("mcp_aql_create", "create_collection", collection="notes")
        export = await _data(aql, EXECUTE, "execute_export", collection="notes")
        run = await _data(aql, EXECUTE, "execute_agent", element_name="builder")
        shown = await _data(aql, READ, "get_execution", execution_id=run["execution_id"])
        listed = await _data(aql, READ, "list_executions")
        newest = await _data(aql, READ, "list_executions", first=1)
        running = await _data(aql, READ, "list_executions", status="running")
        completed = await _data(aql, READ, "list_executions", status="completed", first=5)
        other = await (await aql.as_user("bob")).call(READ, "get_execution", execution_id=run["execution_id"])
        others = await (await aql.as_user("bob")).call(READ, "list_executions")
    assert ID.fullmatch(export["execution_id"])
    assert ID.fullmatch(run["execution_id"])
    assert (shown["execution_id"], shown["kind"], shown["status"], shown["state"]) == (
        run["execution_id"],
        "agent",
        "running",
        "running",
    )
    assert shown["element_name"] == "builder"
    assert [(item["execution_id"], item["kind"]) for item in listed["items"]] == [
        (run["execution_id"], "agent"),
        (export["execution_id"], "export"),
    ]
    assert listed["count"] == 2
    assert ([item["execution_id"] for item in newest["items"]], newest["count"]) == ([run["execution_id"]], 1)
    assert [item["execution_id"] for item in running["items"]] == [run["execution_id"]]
    assert run["execution_id"] not in [item["execution_id"] for item in completed["items"]]
    assert other["error"]["code"] == "NOT_FOUND_RESOURCE"
    assert others["data"]["items"] == []


async def test_cancel_execution_cancels_an_agent_run_and_the_loop_refuses_its_further_steps_8_4_4(
    tmp_path: Path,
) -> None:
    async with aql_session(_settings(tmp_path)) as aql:
        run = await _data(aql, EXECUTE, "execute_agent", element_name="builder")
        ref = {"execution_id": run["execution_id"]}
        cancelled = await _data(aql, EXECUTE, "cancel_execution", **ref)
        step = await aql.call(
            "mcp_aql_create", "record_execution_step", element_name="builder", nextActionHint="read_file a", **ref
        )
        complete = await aql.call(EXECUTE, "complete_execution", element_name="builder", **ref)
        again = await _data(aql, EXECUTE, "cancel_execution", **ref)
        retried = await aql.call(EXECUTE, "retry_execution", **ref)
        shown = await _data(aql, READ, "get_execution", **ref)
        listed = await _data(aql, READ, "list_executions", status="cancelled")
        by_bob = await (await aql.as_user("bob")).call(EXECUTE, "cancel_execution", **ref)
    assert (cancelled["status"], cancelled["state"], cancelled["cancelled"]) == ("cancelled", "cancelled", True)
    assert "finished_at" in cancelled
    assert step["error"]["code"] == "NOT_FOUND_RESOURCE"
    assert complete["error"]["code"] == "NOT_FOUND_RESOURCE"
    assert (again["status"], again["cancelled"]) == ("cancelled", False)
    assert retried["error"]["code"] == "CONFLICT_INVALID_STATE"
    assert retried["error"]["details"]["reason"] == "not_retryable"
    assert shown["status"] == "cancelled"
    assert [item["execution_id"] for item in listed["items"]] == [run["execution_id"]]
    assert by_bob["error"]["code"] == "NOT_FOUND_RESOURCE"


async def test_an_aborted_run_shows_the_failed_core_state_and_a_completed_one_completed(tmp_path: Path) -> None:
    async with aql_session(_settings(tmp_path)) as aql:
        aborted = await _data(aql, EXECUTE, "execute_agent", element_name="a")
        await _data(aql, EXECUTE, "abort_execution", element_name="a", execution_id=aborted["execution_id"])
        completed = await _data(aql, EXECUTE, "execute_agent", element_name="c")
        await _data(aql, EXECUTE, "complete_execution", element_name="c", execution_id=completed["execution_id"])
        failed = await _data(aql, READ, "list_executions", status="failed")
        done = await _data(aql, READ, "list_executions", status="completed")
    assert [(i["execution_id"], i["state"]) for i in failed["items"]] == [(aborted["execution_id"], "aborted")]
    assert [(i["execution_id"], i["state"]) for i in done["items"]] == [(completed["execution_id"], "completed")]


async def test_an_agent_run_id_of_an_older_release_is_accepted_and_a_malformed_one_refused(tmp_path: Path) -> None:
    """Release 0.2.0 named runs `exec_` and 32 hex digits; the store it wrote keeps working."""
    old = "exec_" + "b" * 32
    async with aql_session(_settings(tmp_path)) as aql:
        store = with_built_ins(open_store(_settings(tmp_path)))
        await store.open()
        try:
            principal = (await _data(aql, EXECUTE, "execute_agent", element_name="probe"))["execution_id"]
            probe = await store.safety.get_run(principal)
            assert probe is not None
            await store.safety.start_run(AgentRun(old, "builder", probe.principal, None, "running", 0, 1.0, 1.0))
        finally:
            await store.close()
        shown = await _data(aql, READ, "get_execution", execution_id=old)
        step = await aql.call(
            "mcp_aql_create",
            "record_execution_step",
            element_name="builder",
            nextActionHint="read_file a",
            execution_id=old,
        )
        cancelled = await _data(aql, EXECUTE, "cancel_execution", execution_id=old)
        malformed = await aql.call(READ, "get_execution", execution_id="exec_" + "b" * 28)
        malformed_step = await aql.call(
            "mcp_aql_create", "record_execution_step", element_name="builder", nextActionHint="x", execution_id="r1"
        )
    assert (shown["kind"], shown["status"]) == ("agent", "running")
    assert step["success"], step
    assert (cancelled["status"], cancelled["cancelled"]) == ("cancelled", True)
    assert malformed["error"]["code"].startswith("VALIDATION_")
    assert malformed_step["error"]["code"].startswith("VALIDATION_")


async def test_introspection_publishes_the_run_states_and_the_core_state_each_maps_to_8_4_5(tmp_path: Path) -> None:
    async with aql_session(_settings(tmp_path)) as aql:
        agent = await _data(aql, READ, "introspect", query="operations", name="execute_agent")
        states = await _data(aql, READ, "introspect", query="types", name="AgentRunState")
    lifecycle = agent["operation"]["lifecycle"]
    assert lifecycle["states"] == ["running", "paused", "blocked", "completed", "aborted", "cancelled"]
    assert lifecycle["supports_cancel"] is True
    assert states["type"]["values"] == lifecycle["states"]
    description = states["type"]["description"]
    for mapping in ("paused -> running", "blocked -> running", "aborted -> failed", "cancelled -> cancelled"):
        assert mapping in description
