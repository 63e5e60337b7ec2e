"""MCP 2025-11-25 tasks mapped onto executions, against a real server (docs/executions.md, "MCP
tasks"): declared only to a client that declares `tasks`, a task-augmented execute_import or
execute_export is a task whose id is the execution's, and the tasks methods read and cancel it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.aql import HEADERS, LEAKS, VERSION, Session
from tests.support.executions import BIG, CREATE, EXECUTE, READ, import_params, ndjson, rows
from tests.support.server import ServerProcess, start_server

CAPABILITY = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with start_server(tmp_path_factory.mktemp("execution-tasks"), env=BIG, plugins=()) as started:
        yield started


@contextmanager
def connect(
    server: ServerProcess, subject: str, capabilities: dict[str, Any]
) -> Iterator[tuple[Session, dict[str, Any]]]:
    """A 2025-11-25 session declaring `capabilities`, and its initialize result."""
    with httpx.Client(base_url=server.base, timeout=60) as http:
        headers = {**HEADERS, "authorization": f"Bearer {server.token(subject=subject)}"}
        init = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": VERSION,
                "capabilities": capabilities,
                "clientInfo": {"name": "t", "version": "1"},
            },
        }
        answer = http.post("/mcp", json=init, headers=headers)
        assert answer.status_code == 200, answer.text
        headers |= {"mcp-session-id": answer.headers["mcp-session-id"], "mcp-protocol-version": VERSION}
        yield Session(http, headers), answer.json()["result"]


def rpc(caller: Session, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """The JSON-RPC response (result or error), checked for leaks."""
    response = caller.http.post(
        "/mcp", json={"jsonrpc": "2.0", "id": 9, "method": method, "params": params}, headers=caller.headers
    )
    assert not any(leak in response.text for leak in LEAKS), response.text
    assert response.headers["content-type"].startswith("application/json")
    body = dict(response.json())
    # Within a 2025-11-25 session a JSON-RPC error is an answer like any other (docs/errors.md).
    assert response.status_code == 200, (response.status_code, body)
    return body


def as_task(caller: Session, tool: str, operation: str, params: dict[str, Any]) -> dict[str, Any]:
    arguments = {"operation": operation, "params": params}
    return rpc(caller, "tools/call", {"name": tool, "arguments": arguments, "task": {"ttl": 60000}})


def test_a_client_without_the_tasks_capability_sees_no_tasks_at_all(server: ServerProcess) -> None:
    with connect(server, "plain", {}) as (caller, initialized):
        assert "tasks" not in initialized["capabilities"]
        tools = rpc(caller, "tools/list", {})["result"]["tools"]
        assert all("execution" not in tool for tool in tools)
        missing = rpc(caller, "tasks/get", {"taskId": "exec_000000000000000000000000"})
        assert missing["error"]["code"] == -32601
        assert caller.call(CREATE, "create_collection", collection="c")["success"]
        # The task field is ignored by a receiver that declared no tasks capability: a plain call.
        plain = as_task(caller, EXECUTE, "execute_import", import_params("c", ndjson(rows(3))))["result"]
        assert "task" not in plain
        assert plain["structuredContent"]["data"]["execution_id"].startswith("exec_")


def test_a_task_augmented_import_is_a_task_whose_id_is_the_execution(server: ServerProcess) -> None:
    with connect(server, "tasker", {"tasks": CAPABILITY}) as (caller, initialized):
        assert initialized["capabilities"]["tasks"] == CAPABILITY
        tools = {tool["name"]: tool for tool in rpc(caller, "tools/list", {})["result"]["tools"]}
        assert tools[EXECUTE]["execution"] == {"taskSupport": "optional"}
        assert "execution" not in tools[READ]
        assert caller.call(CREATE, "create_collection", collection="c")["success"]
        created = as_task(caller, EXECUTE, "execute_import", import_params("c", ndjson(rows(2500))))["result"]
        task = created["task"]
        assert task["taskId"].startswith("exec_")
        assert task["status"] == "working"
        assert task["createdAt"].endswith("Z")
        assert {"lastUpdatedAt", "ttl", "pollInterval"} <= set(task)
        result = rpc(caller, "tasks/result", {"taskId": task["taskId"]})["result"]
        assert result["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": task["taskId"]}
        data = result["structuredContent"]["data"]
        assert (data["execution_id"], data["status"], data["imported"]) == (task["taskId"], "completed", 2500)
        got = rpc(caller, "tasks/get", {"taskId": task["taskId"]})["result"]
        assert got["status"] == "completed"
        assert task["taskId"] in [t["taskId"] for t in rpc(caller, "tasks/list", {})["result"]["tasks"]]
        ended = rpc(caller, "tasks/cancel", {"taskId": task["taskId"]})
        assert ended["error"]["code"] == -32602
        # The same execution, read as one.
        assert caller.call(READ, "get_execution", execution_id=task["taskId"])["data"]["status"] == "completed"


def test_tasks_cancel_stops_the_running_import(server: ServerProcess) -> None:
    with connect(server, "canceller", {"tasks": CAPABILITY}) as (caller, _):
        assert caller.call(CREATE, "create_collection", collection="c")["success"]
        task = as_task(caller, EXECUTE, "execute_import", import_params("c", ndjson(rows(100_000))))["result"]["task"]
        cancelled = rpc(caller, "tasks/cancel", {"taskId": task["taskId"]})["result"]
        assert (cancelled["taskId"], cancelled["status"]) == (task["taskId"], "cancelled")
        result = rpc(caller, "tasks/result", {"taskId": task["taskId"]})["result"]
        assert result["structuredContent"]["data"]["status"] == "cancelled"


def test_a_failed_task_is_never_retried_since_a_task_has_no_way_back_from_failed(tmp_path: Path) -> None:
    """2025-11-25 tasks, "Task Status Lifecycle": failed is terminal, so retry_execution refuses it."""
    env = {**BIG, "AQL_MCP_RECORDS__MAX_RECORDS": "10"}
    with (
        start_server(tmp_path, env=env, plugins=()) as small,
        connect(small, "quota", {"tasks": CAPABILITY}) as (
            caller,
            _,
        ),
    ):
        assert caller.call(CREATE, "create_collection", collection="c")["success"]
        task = as_task(caller, EXECUTE, "execute_import", import_params("c", ndjson(rows(50))))["result"]["task"]
        result = rpc(caller, "tasks/result", {"taskId": task["taskId"]})["result"]
        assert result["isError"] is True
        assert result["structuredContent"]["error"]["code"] == "RATE_LIMIT_QUOTA_EXHAUSTED"
        assert rpc(caller, "tasks/get", {"taskId": task["taskId"]})["result"]["status"] == "failed"
        refused = caller.call(EXECUTE, "retry_execution", execution_id=task["taskId"])
        assert refused["error"]["code"] == "CONFLICT_INVALID_STATE"
        assert refused["error"]["details"]["reason"] == "task"
        assert rpc(caller, "tasks/get", {"taskId": task["taskId"]})["result"]["status"] == "failed"


def test_task_augmented_calls_of_other_operations_are_refused(server: ServerProcess) -> None:
    with connect(server, "curious", {"tasks": CAPABILITY}) as (caller, _):
        ref = {"execution_id": "exec_000000000000000000000000"}
        # A tool that lists no taskSupport: -32601 (2025-11-25 tasks, "Tool-Level Negotiation").
        assert as_task(caller, READ, "get_execution", ref)["error"]["code"] == -32601
        # The execute tool, but an operation that runs no task: -32602 naming the ones that do.
        refused = as_task(caller, EXECUTE, "cancel_execution", ref)["error"]
        assert refused["code"] == -32602
        assert refused["data"]["operations"] == ["execute_import", "execute_export"]
        # A refusal before any execution existed is the plain call's answer: no task was created.
        failed = as_task(caller, EXECUTE, "execute_import", import_params("missing", ndjson(rows(1))))["result"]
        assert failed["isError"] is True
        assert failed["structuredContent"]["error"]["code"] == "NOT_FOUND_RESOURCE"


def test_another_callers_task_is_not_found(server: ServerProcess) -> None:
    with connect(server, "owner", {"tasks": CAPABILITY}) as (caller, _):
        assert caller.call(CREATE, "create_collection", collection="c")["success"]
        task = as_task(caller, EXECUTE, "execute_export", {"collection": "c"})["result"]["task"]
    with connect(server, "thief", {"tasks": CAPABILITY}) as (thief, _):
        for method in ("tasks/get", "tasks/result", "tasks/cancel"):
            assert rpc(thief, method, {"taskId": task["taskId"]})["error"]["code"] == -32602
        assert rpc(thief, "tasks/list", {})["result"]["tasks"] == []
        assert rpc(thief, "tasks/list", {"cursor": "!!"})["error"]["code"] == -32602


def test_tasks_are_bound_to_their_principal_even_within_one_shared_tenant(tmp_path: Path) -> None:
    """2025-11-25 tasks, "Security Considerations": a task is bound to its requestor; executions
    stay the tenant's (here one tenant, the issuer, shared by every principal)."""
    env = {**BIG, "AQL_MCP_RECORDS__TENANT_CLAIM": "iss"}
    with start_server(tmp_path, env=env, plugins=()) as shared:
        with connect(shared, "member-a", {"tasks": CAPABILITY}) as (caller, _):
            assert caller.call(CREATE, "create_collection", collection="c")["success"]
            task = as_task(caller, EXECUTE, "execute_export", {"collection": "c"})["result"]["task"]
            assert [t["taskId"] for t in rpc(caller, "tasks/list", {})["result"]["tasks"]] == [task["taskId"]]
        with connect(shared, "member-b", {"tasks": CAPABILITY}) as (member, _):
            for method in ("tasks/get", "tasks/result", "tasks/cancel"):
                refused = rpc(member, method, {"taskId": task["taskId"]})
                assert refused["error"]["code"] == -32602, method
            assert rpc(member, "tasks/list", {})["result"]["tasks"] == []
            # The execution itself is the tenant's: an MCP-AQL read finds it.
            found = member.call(READ, "get_execution", execution_id=task["taskId"])
            assert found["data"]["execution_id"] == task["taskId"]


def test_a_failed_tasks_status_message_carries_its_failure(tmp_path: Path) -> None:
    env = {**BIG, "AQL_MCP_RECORDS__MAX_RECORDS": "10"}
    with (
        start_server(tmp_path, env=env, plugins=()) as small,
        connect(small, "failing", {"tasks": CAPABILITY}) as (
            caller,
            _,
        ),
    ):
        assert caller.call(CREATE, "create_collection", collection="c")["success"]
        task = as_task(caller, EXECUTE, "execute_import", import_params("c", ndjson(rows(50))))["result"]["task"]
        rpc(caller, "tasks/result", {"taskId": task["taskId"]})
        got = rpc(caller, "tasks/get", {"taskId": task["taskId"]})["result"]
        assert got["status"] == "failed"
        assert "RATE_LIMIT_QUOTA_EXHAUSTED" in got["statusMessage"]
