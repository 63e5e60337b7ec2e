"""Executions as 2026-07-28 tasks (docs/executions.md, "MCP tasks (2026-07-28)"), in process on
both store engines: a modern request that declares the Tasks extension and starts an execution (an
import, an export, an agent run) is answered with a task whose id is the execution's, and
`tasks/get`, `tasks/update` and `tasks/cancel` read and change the execution, for its principal only."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from aql_mcp.auth.dev_issuer import DevIssuer
from aql_mcp.plugins.executions.modern_tasks import failed_error
from aql_mcp.settings import Settings
from tests.operations.client import RECORDS, records_settings
from tests.support.asgi import asgi_client
from tests.support.engines import Backend
from tests.support.executions import import_params, ndjson, rows
from tests.support.modern import modern_body, modern_headers
from tests.support.tasks import meta
from tests.support.wait import arrives

pytestmark = pytest.mark.anyio
EXECUTIONS = "aql_mcp.plugins.executions:plugin"
SAFETY = "aql_mcp.plugins.safety:plugin"
EXECUTE, READ, CREATE = "mcp_aql_execute", "mcp_aql_read", "mcp_aql_create"
PLAIN = {"elicitation": {}}
RETENTION = 600
BATCH = 100


def _settings(backend: Backend, **executions: Any) -> Settings:
    settings = records_settings(
        backend.path,
        store={"url": backend.url},
        mcp={"modern_era": True},
        executions={"retention_seconds": RETENTION, "batch_size": BATCH, **executions},
    )
    server = settings.server.model_copy(update={"plugins": (RECORDS, EXECUTIONS, SAFETY)})
    return settings.model_copy(update={"server": server})


@dataclass
class Modern:
    """A 2026-07-28 client of the in-process app: every request on its own, `_meta` and headers
    as the era asks; it declares the Tasks extension unless told otherwise."""

    http: httpx.AsyncClient
    settings: Settings

    def token(self, subject: str) -> str:
        issuer = DevIssuer(
            state_dir=self.settings.store.path, issuer=self.settings.issuer, audience=self.settings.audience
        )
        return issuer.mint(subject=subject, scopes=["mcp"], ttl=600)

    async def send(
        self, method: str, params: dict[str, Any], caller: str, caps: dict[str, Any] | None = None
    ) -> httpx.Response:
        name = params.get("name") if method == "tools/call" else params.get("taskId")
        headers = modern_headers(self.token(caller), method, name, arguments=params.get("arguments"))
        return await self.http.post("/mcp", json=modern_body(method, params, meta(caps), 5), headers=headers)

    async def result(
        self, method: str, params: dict[str, Any], caller: str = "alice", caps: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        response = await self.send(method, params, caller, caps)
        assert response.status_code == 200, response.text
        return dict(response.json()["result"])

    async def call(self, tool: str, operation: str, caller: str = "alice", **params: Any) -> dict[str, Any]:
        arguments = {"operation": operation, "params": params}
        return await self.result("tools/call", {"name": tool, "arguments": arguments}, caller)

    async def acked(self, method: str, params: dict[str, Any], caller: str = "alice") -> bool:
        """Whether `method` answered the empty acknowledgement (SEP-2663: tasks/update, tasks/cancel)."""
        result = await self.result(method, params, caller)
        return {key: value for key, value in result.items() if key != "_meta"} == {"resultType": "complete"}

    async def get(self, task_id: str, caller: str = "alice") -> dict[str, Any]:
        return await self.result("tasks/get", {"taskId": task_id}, caller)

    async def ended(self, task_id: str, caller: str = "alice") -> dict[str, Any]:
        seen: dict[str, Any] = {}

        async def terminal() -> bool:
            seen.update(await self.get(task_id, caller))
            return seen["status"] in ("completed", "failed", "cancelled")

        await arrives(terminal, f"task {task_id} did not end")
        return seen


def _progress(task: dict[str, Any]) -> int:
    """The rows processed so far, as the task's status message says them ("importing rows (n of m)")."""
    found = re.search(r"\((\d+) of \d+\)", task.get("statusMessage", ""))
    return int(found.group(1)) if found else 0


@asynccontextmanager
async def modern(settings: Settings) -> AsyncIterator[Modern]:
    async with asgi_client(settings) as http:
        client = Modern(http, settings)
        assert (await client.call(CREATE, "create_collection", collection="c"))["structuredContent"]["success"]
        yield client


async def test_an_import_is_a_task_whose_id_is_the_execution_and_completes_with_its_envelope(
    backend: Backend,
) -> None:
    async with modern(_settings(backend)) as client:
        created = await client.call(EXECUTE, "execute_import", **import_params("c", ndjson(rows(250))))
        assert created["resultType"] == "task"
        task_id = created["taskId"]
        assert task_id.startswith("exec_")
        assert created["status"] == "working"
        assert (created["ttlMs"], created["pollIntervalMs"]) == (RETENTION * 1000, 1000)
        assert created["createdAt"].endswith("Z")
        assert created["lastUpdatedAt"].endswith("Z")
        assert not {"result", "error", "structuredContent", "content"} & set(created)
        done = await client.ended(task_id)
        assert done["resultType"] == "complete"
        assert done["status"] == "completed"
        envelope = done["result"]["structuredContent"]
        assert envelope["success"] is True
        assert (envelope["data"]["execution_id"], envelope["data"]["status"]) == (task_id, "completed")
        assert envelope["data"]["imported"] == 250
        # The same execution through MCP-AQL.
        shown = await client.call(READ, "get_execution", execution_id=task_id)
        assert shown["structuredContent"]["data"]["status"] == "completed"
        # Nothing is ever asked of the client: an update is acknowledged and changes nothing.
        answers = {"inputResponses": {"k": {"action": "accept", "content": {}}}}
        assert await client.acked("tasks/update", {"taskId": task_id, **answers})
        assert await client.acked("tasks/cancel", {"taskId": task_id})
        assert (await client.get(task_id))["status"] == "completed"


async def test_without_the_extension_the_call_is_plain_and_a_refused_call_is_no_task(backend: Backend) -> None:
    async with modern(_settings(backend)) as client:
        arguments = {"operation": "execute_export", "params": {"collection": "c"}}
        plain = await client.result("tools/call", {"name": EXECUTE, "arguments": arguments}, caps=PLAIN)
        assert plain["resultType"] == "complete"
        assert plain["structuredContent"]["data"]["execution_id"].startswith("exec_")
        refused = await client.call(EXECUTE, "execute_export", collection="missing")
        assert refused["resultType"] == "complete"
        assert refused["isError"] is True
        assert refused["structuredContent"]["error"]["code"] == "NOT_FOUND_RESOURCE"
        # Operations that do not start an execution are never tasks.
        listed = await client.call(READ, "list_executions")
        assert listed["resultType"] == "complete"
        # The tools list the same with the extension or without: SEP-2663 has no tool-level marker.
        with_tasks = await client.result("tools/list", {})
        without = await client.result("tools/list", {}, caps=PLAIN)
        assert with_tasks["tools"] == without["tools"]
        assert all("execution" not in tool for tool in with_tasks["tools"])


async def test_another_principals_execution_is_no_task_of_the_caller(backend: Backend) -> None:
    async with modern(_settings(backend)) as client:
        task_id = (await client.call(EXECUTE, "execute_export", collection="c"))["taskId"]
        for method, extra in (("tasks/get", {}), ("tasks/update", {"inputResponses": {}}), ("tasks/cancel", {})):
            for caller, wanted in (("mallory", task_id), ("alice", "exec_" + "0" * 24)):
                response = await client.send(method, {"taskId": wanted, **extra}, caller)
                assert response.status_code == 400, response.text
                error = response.json()["error"]
                assert (error["code"], error["data"]["field"], error["data"]["reason"]) == (-32602, "taskId", "unknown")
        assert (await client.ended(task_id))["status"] == "completed"


async def test_a_failed_import_is_a_failed_task_with_the_aql_error_and_is_never_retried(backend: Backend) -> None:
    settings = _settings(backend)
    settings = settings.model_copy(update={"records": settings.records.model_copy(update={"max_records": 10})})
    async with modern(settings) as client:
        task_id = (await client.call(EXECUTE, "execute_import", **import_params("c", ndjson(rows(50)))))["taskId"]
        failed = await client.ended(task_id)
        assert failed["status"] == "failed"
        assert "result" not in failed
        error = failed["error"]
        assert error["code"] == -32603
        assert error["data"]["execution_id"] == task_id
        assert error["data"]["aql_error"]["code"] == "RATE_LIMIT_QUOTA_EXHAUSTED"
        assert error["data"]["retryable"] is True
        assert failed["statusMessage"].startswith("RATE_LIMIT_QUOTA_EXHAUSTED: ")
        refused = (await client.call(EXECUTE, "retry_execution", execution_id=task_id))["structuredContent"]
        assert (refused["error"]["code"], refused["error"]["details"]["reason"]) == ("CONFLICT_INVALID_STATE", "task")


async def test_tasks_cancel_stops_the_import_between_batches(backend: Backend) -> None:
    async with modern(_settings(backend, batch_pause_seconds=0.2)) as client:
        task_id = (await client.call(EXECUTE, "execute_import", **import_params("c", ndjson(rows(5000)))))["taskId"]

        async def started() -> bool:
            return _progress(await client.get(task_id)) >= BATCH

        await arrives(started, "the import wrote no batch")
        assert await client.acked("tasks/cancel", {"taskId": task_id})
        cancelled = await client.ended(task_id)
        assert cancelled["status"] == "cancelled"
        assert not {"result", "error"} & set(cancelled)
        execution = (await client.call(READ, "get_execution", execution_id=task_id))["structuredContent"]["data"]
        imported = execution["progress"]["current"] - execution["rejected"]
        assert 0 < imported < 5000
        assert imported % BATCH == 0
        listed = (await client.call(READ, "list_collections"))["structuredContent"]["data"]["items"]
        assert next(int(c["record_count"]) for c in listed if c["name"] == "c") == imported


async def test_agent_runs_are_tasks_too(backend: Backend) -> None:
    async with modern(_settings(backend)) as client:
        runs = []
        for _ in range(3):
            created = await client.call(EXECUTE, "execute_agent", element_name="builder")
            assert created["resultType"] == "task"
            runs.append(created["taskId"])
        working = await client.get(runs[0])
        assert working["status"] == "working"
        assert "running" in working["statusMessage"]
        finished = await client.call(EXECUTE, "complete_execution", element_name="builder", execution_id=runs[0])
        assert finished["structuredContent"]["success"], finished
        completed = await client.get(runs[0])
        assert completed["status"] == "completed"
        assert completed["result"]["structuredContent"]["data"]["state"] == "completed"
        aborted = await client.call(EXECUTE, "abort_execution", element_name="builder", execution_id=runs[1])
        assert aborted["structuredContent"]["success"], aborted
        failed = await client.get(runs[1])
        assert failed["status"] == "failed"
        assert (failed["error"]["code"], failed["error"]["data"]["retryable"]) == (-32603, False)
        assert failed["error"]["data"]["state"] == "aborted"
        assert await client.acked("tasks/cancel", {"taskId": runs[2]})
        assert (await client.get(runs[2]))["status"] == "cancelled"
        response = await client.send("tasks/get", {"taskId": runs[2]}, "mallory")
        assert response.status_code == 400


def test_only_a_failure_the_same_call_may_get_past_is_retryable() -> None:
    """A replica that went away (INTERNAL_ERROR, replica_stopped) or a quota that frees up may let a
    new call succeed; a payload too large never does."""
    lost = failed_error(
        "exec_1", {"code": "INTERNAL_ERROR", "message": "gone", "details": {"reason": "replica_stopped"}}
    )
    assert lost == {
        "code": -32603,
        "message": "The execution failed: gone",
        "data": {
            "execution_id": "exec_1",
            "aql_error": {"code": "INTERNAL_ERROR", "message": "gone", "details": {"reason": "replica_stopped"}},
            "retryable": True,
        },
    }
    too_large = failed_error("exec_2", {"code": "VALIDATION_PAYLOAD_TOO_LARGE", "message": "too large"})
    assert too_large["data"]["retryable"] is False
    assert too_large["data"]["aql_error"] == {"code": "VALIDATION_PAYLOAD_TOO_LARGE", "message": "too large"}


async def test_in_single_mode_the_single_tool_starts_the_task(backend: Backend) -> None:
    settings = _settings(backend)
    settings = settings.model_copy(update={"aql": settings.aql.model_copy(update={"mode": "single"})})
    async with asgi_client(settings) as http:
        client = Modern(http, settings)
        (single,) = [
            tool["name"] for tool in (await client.result("tools/list", {}))["tools"] if "mcp_aql" in tool["name"]
        ]
        arguments = {"operation": "create_collection", "params": {"collection": "c"}}
        assert (await client.result("tools/call", {"name": single, "arguments": arguments}))["resultType"] == "complete"
        arguments = {"operation": "execute_export", "params": {"collection": "c"}}
        created = await client.result("tools/call", {"name": single, "arguments": arguments})
        assert created["resultType"] == "task"
        assert (await client.ended(created["taskId"]))["result"]["structuredContent"]["data"]["kind"] == "export"
