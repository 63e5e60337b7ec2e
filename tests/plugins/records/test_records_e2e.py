"""End to end: the official `mcp` client against a real server, discovering operations only by introspect."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import types
from mcp.client import ClientRequestContext

from tests.support.records import ELICIT, aql_client
from tests.support.server import ServerProcess, start_server
from tests.support.wait import eventually

pytestmark = pytest.mark.anyio


async def test_an_agent_discovers_operations_by_introspection_and_manages_records(tmp_path: Path) -> None:
    with start_server(tmp_path, plugins=()) as server:
        async with aql_client(server) as call:
            listing = await call("mcp_aql_read", "introspect", query="operations")
            tools = {}
            for op in listing["data"]["operations"]:
                detail = await call("mcp_aql_read", "introspect", query="operations", name=op["name"])
                tools[op["name"]] = detail["data"]["operation"]["mcpTool"]
            assert (await call(tools["create_collection"], "create_collection", collection="tasks"))["success"]
            made = [
                (await call(tools["create_record"], "create_record", collection="tasks", data=data))["data"]
                for data in ({"title": "a", "state": "open"}, {"title": "b", "state": "done"})
            ]
            listed = await call(
                tools["list_records"],
                "list_records",
                collection="tasks",
                filter={"state": "open"},
                fields=["title"],
            )
            assert listed["data"]["items"] == [{"title": "a"}]
            updated = await call(
                tools["update_record"],
                "update_record",
                collection="tasks",
                id=made[0]["id"],
                input={"state": "done"},
                if_match=made[0]["_etag"],
            )
            assert updated["data"]["state"] == "done"
            deleted = await call(tools["delete_record"], "delete_record", collection="tasks", id=made[1]["id"])
            assert deleted["data"]["deleted"] is True


async def _delete_collection_with_human(
    server: ServerProcess, answer: types.ElicitResult
) -> tuple[dict[str, Any], list[types.ElicitRequestParams]]:
    asked: list[types.ElicitRequestParams] = []

    async def elicit(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return answer

    async with aql_client(server, elicitation_callback=elicit) as call:
        await call("mcp_aql_create", "create_collection", collection="old")
        result = await call("mcp_aql_delete", "delete_collection", collection="old")
    return result, asked


async def test_with_elicitation_on_the_human_confirms_a_dangerous_operation_instead_of_the_agent(
    tmp_path: Path,
) -> None:
    """records issue: `aql.confirm_with_elicitation` asks through elicitation/create, no token is handed out."""
    with start_server(tmp_path, env=ELICIT, plugins=()) as server:
        done, asked = await _delete_collection_with_human(
            server, types.ElicitResult(action="accept", content={"confirm": True})
        )
    assert done["success"] is True
    assert done["data"]["deleted"] is True
    [question] = asked
    assert "delete_collection" in question.message


@pytest.mark.parametrize(
    "answer",
    [
        types.ElicitResult(action="accept", content={"confirm": False}),
        types.ElicitResult(action="decline"),
        types.ElicitResult(action="cancel"),
    ],
)
async def test_a_human_who_does_not_confirm_leaves_the_collection_in_place(
    tmp_path: Path, answer: types.ElicitResult
) -> None:
    with start_server(tmp_path, env=ELICIT, plugins=()) as server:
        refused, _ = await _delete_collection_with_human(server, answer)
    assert refused["error"]["code"] == "PERMISSION_DENIED"
    assert "confirmation_token" not in str(refused)


async def test_mutations_refusals_and_token_events_are_audited_without_values(tmp_path: Path) -> None:
    """records issue, Audit: event type, operation, principal digest, resource id, outcome; no values."""
    secret_value = "audit-must-not-see-this-value-7f3a"
    with start_server(tmp_path, plugins=()) as server:
        async with aql_client(server, subject="auditee") as call:
            await call("mcp_aql_create", "create_collection", collection="c")
            made = await call("mcp_aql_create", "create_record", collection="c", data={"s": secret_value})
            missing = "rec_0123456789abcdef0123"
            await call("mcp_aql_update", "update_record", collection="c", id=missing, input={"s": 1})
            gated = await call("mcp_aql_delete", "delete_collection", collection="c")
            token = gated["error"]["details"]["confirmation_token"]
            await call("mcp_aql_delete", "delete_collection", collection="c", _confirmation="conf_wrong")
            await call("mcp_aql_delete", "delete_collection", collection="c", _confirmation=token)
        await eventually(lambda: "redeemed" in server.log_text(), "the token redemption was never audited")
        lines = [json.loads(line) for line in server.log_text().splitlines() if '"audit"' in line]
        log = server.log_text()
    events = {(e["audit"], e["operation"], e["outcome"], e.get("code")) for e in lines}
    assert ("mutation", "create_record", "success", None) in events
    assert ("refusal", "update_record", "refused", "NOT_FOUND_RESOURCE") in events
    assert ("token", "delete_collection", "issued", None) in events
    assert ("token", "delete_collection", "rejected", "TOKEN_INVALID") in events
    assert ("token", "delete_collection", "redeemed", None) in events
    assert ("mutation", "delete_collection", "success", None) in events
    created = next(e for e in lines if e["audit"] == "mutation" and e["operation"] == "create_record")
    assert created["resource_id"] == made["data"]["id"]
    assert all(e["principal"] != "auditee" and len(e["principal"]) >= 16 for e in lines)
    assert secret_value not in log
    assert token not in log
