"""The safety loop against the gatekeeper's elicitation path, on a real server with the official
client (MCP-AQL §8.7.3 self-approval; docs/safety.md, "Gatekeeper confirmations during a run").

With `aql.confirm_with_elicitation` on, the elicitation would go to the client that made the call:
during a monitored run that is the agent, which would then confirm its own operation. The server
must hand out a token (held as `permission_pending`) instead of asking.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp import types
from mcp.client import ClientRequestContext

from tests.support.records import ELICIT, aql_client
from tests.support.server import start_server

pytestmark = pytest.mark.anyio


async def test_an_agent_in_a_monitored_run_is_not_asked_to_confirm_its_own_operation_8_7_3(
    tmp_path: Path,
) -> None:
    asked: list[types.ElicitRequestParams] = []

    async def elicit(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"confirm": True})

    with start_server(tmp_path, env=ELICIT, plugins=()) as server:
        async with aql_client(server, subject="agent", elicitation_callback=elicit) as call:
            await call("mcp_aql_create", "create_collection", collection="old")
            await call("mcp_aql_execute", "execute_agent", element_name="builder")
            gated = await call("mcp_aql_delete", "delete_collection", collection="old")
            token = gated["error"]["details"]["confirmation_token"]
            step = await call("mcp_aql_create", "record_execution_step", element_name="builder", nextActionHint="x")
            early = await call("mcp_aql_delete", "delete_collection", collection="old", _confirmation=token)
            listed = await call("mcp_aql_read", "list_collections")
    assert asked == []
    assert gated["error"]["code"] == "CONFIRMATION_REQUIRED"
    assert step["data"]["continue"] is False
    assert [n["type"] for n in step["data"]["notifications"]] == ["permission_pending"]
    assert early["error"]["code"] == "PERMISSION_DENIED"
    assert early["error"]["details"]["reason"] == "awaiting_operator"
    assert "old" in str(listed["data"])


async def test_without_a_live_run_the_human_is_still_asked_by_elicitation(tmp_path: Path) -> None:
    asked: list[types.ElicitRequestParams] = []

    async def elicit(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"confirm": True})

    with start_server(tmp_path, env=ELICIT, plugins=()) as server:
        async with aql_client(server, subject="agent", elicitation_callback=elicit) as call:
            await call("mcp_aql_create", "create_collection", collection="old")
            await call("mcp_aql_execute", "execute_agent", element_name="builder")
            ended = await call("mcp_aql_execute", "complete_execution", element_name="builder")
            done = await call("mcp_aql_delete", "delete_collection", collection="old")
    assert ended["success"] is True, ended
    assert len(asked) == 1
    assert done["data"]["deleted"] is True


async def test_a_run_started_while_the_question_is_open_holds_the_accepted_call_8_7_3(tmp_path: Path) -> None:
    """The hold is checked again after the answer: the agent starts an execution from a second
    session while the elicitation is open, then accepts; the call is not run, it gets a held token."""
    started: list[dict[str, Any]] = []

    with start_server(tmp_path, env=ELICIT, plugins=()) as server:

        async def elicit(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
            async with aql_client(server, subject="agent") as other:
                started.append(await other("mcp_aql_execute", "execute_agent", element_name="builder"))
            return types.ElicitResult(action="accept", content={"confirm": True})

        async with aql_client(server, subject="agent", elicitation_callback=elicit) as call:
            await call("mcp_aql_create", "create_collection", collection="old")
            gated = await call("mcp_aql_delete", "delete_collection", collection="old")
            token = gated["error"]["details"]["confirmation_token"]
            early = await call("mcp_aql_delete", "delete_collection", collection="old", _confirmation=token)
            step = await call("mcp_aql_create", "record_execution_step", element_name="builder", nextActionHint="x")
            listed = await call("mcp_aql_read", "list_collections")
    assert started[0]["success"] is True, started
    assert gated["error"]["code"] == "CONFIRMATION_REQUIRED"
    assert early["error"]["code"] == "PERMISSION_DENIED"
    assert early["error"]["details"]["reason"] == "awaiting_operator"
    assert step["data"]["continue"] is False
    assert [n["type"] for n in step["data"]["notifications"]] == ["permission_pending"]
    assert "old" in str(listed["data"])
