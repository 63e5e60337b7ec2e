"""Task status notifications of executions run as 2026-07-28 tasks (SEP-2663, "Task Status
Notifications"; docs/executions.md, "MCP tasks (2026-07-28)"), in process on both store engines: a
listen stream that names an execution's task id is agreed to it for its owner only, hears its state
at once, and a `notifications/tasks` at each status change, each the DetailedTask `tasks/get`
answers then. Agent runs (the safety plugin's executions) too."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from aql_mcp.app import create_app
from aql_mcp.auth.dev_issuer import DevIssuer
from aql_mcp.settings import Settings
from tests.operations.client import RECORDS, records_settings
from tests.support.asgi import BASE
from tests.support.engines import Backend
from tests.support.executions import import_params, ndjson, rows
from tests.support.listen import LISTEN, SUBSCRIPTION_ID, AppStream, app_listen
from tests.support.modern import modern_body, modern_headers
from tests.support.tasks import meta

pytestmark = pytest.mark.anyio
EXECUTIONS = "aql_mcp.plugins.executions:plugin"
SAFETY = "aql_mcp.plugins.safety:plugin"
EXECUTE, CREATE = "mcp_aql_execute", "mcp_aql_create"
TASK_STATUS = "notifications/tasks"
ENDS = ("completed", "failed", "cancelled")


def _settings(backend: Backend) -> Settings:
    # Batches of 10 rows, each followed by a pause: a 1,000-row import runs for seconds, so it is
    # still running when a test cancels it, whatever the machine.
    settings = records_settings(
        backend.path,
        store={"url": backend.url},
        mcp={"modern_era": True},
        executions={"batch_size": 10, "batch_pause_seconds": 0.05},
    )
    server = settings.server.model_copy(update={"plugins": (RECORDS, EXECUTIONS, SAFETY)})
    return settings.model_copy(update={"server": server})


@dataclass
class Client:
    """2026-07-28 requests to the app in process, each declaring the Tasks extension."""

    app: Starlette
    http: httpx.AsyncClient
    issuer: DevIssuer

    def token(self, subject: str) -> str:
        return self.issuer.mint(subject=subject, scopes=["mcp"], ttl=600)

    async def result(self, method: str, params: dict[str, Any], caller: str) -> dict[str, Any]:
        name = params.get("name") if method == "tools/call" else params.get("taskId")
        headers = modern_headers(self.token(caller), method, name, arguments=params.get("arguments"))
        response = await self.http.post("/mcp", json=modern_body(method, params, meta(), 5), headers=headers)
        assert response.status_code == 200, response.text
        return dict(response.json()["result"])

    async def call(self, tool: str, operation: str, caller: str, **params: Any) -> dict[str, Any]:
        arguments = {"operation": operation, "params": params}
        return await self.result("tools/call", {"name": tool, "arguments": arguments}, caller)

    async def start_import(self, caller: str, count: int) -> str:
        created = await self.call(CREATE, "create_collection", caller, collection="c")
        assert created["structuredContent"]["success"], created
        started = await self.call(EXECUTE, "execute_import", caller, **import_params("c", ndjson(rows(count))))
        assert started["resultType"] == "task", started
        return str(started["taskId"])

    async def got(self, task_id: str, caller: str = "alice") -> dict[str, Any]:
        """`tasks/get` as a notification carries it: without the result's own `resultType` and `_meta`."""
        task = await self.result("tasks/get", {"taskId": task_id}, caller)
        return {key: value for key, value in task.items() if key not in ("resultType", "_meta")}

    def listen(self, caller: str, task_ids: list[str]) -> Any:
        body = modern_body(LISTEN, {"notifications": {"taskIds": task_ids}}, meta(), 31)
        return app_listen(self.app, body, modern_headers(self.token(caller), LISTEN))


@asynccontextmanager
async def client_of(backend: Backend) -> AsyncIterator[Client]:
    settings = _settings(backend)
    app = create_app(settings)
    issuer = DevIssuer(state_dir=settings.store.path, issuer=settings.issuer, audience=settings.audience)
    transport = httpx.ASGITransport(app=app)
    async with app.router.lifespan_context(app), httpx.AsyncClient(transport=transport, base_url=BASE) as http:
        yield Client(app, http, issuer)


async def task_until_end(stream: AppStream) -> list[dict[str, Any]]:
    """The task notifications the stream writes, up to the first that says the task ended."""
    heard: list[dict[str, Any]] = []
    while not heard or heard[-1]["status"] not in ENDS:
        message = await stream.next()
        assert message["method"] == TASK_STATUS, message
        assert message["params"]["_meta"] == {SUBSCRIPTION_ID: 31}
        heard.append({key: value for key, value in message["params"].items() if key != "_meta"})
    return heard


async def test_an_imports_task_is_agreed_to_its_owner_only_and_its_end_is_told_as_tasks_get_answers(
    backend: Backend,
) -> None:
    async with client_of(backend) as client:
        mine = await client.start_import("alice", 250)
        foreign = await client.start_import("bob", 5)
        async with client.listen("alice", [mine, foreign, "exec_" + "0" * 32]) as stream:
            ack = await stream.next()
            assert stream.status == 200
            assert ack["method"] == "notifications/subscriptions/acknowledged"
            assert ack["params"]["notifications"] == {"taskIds": [mine]}
            heard = await task_until_end(stream)
        assert {task["taskId"] for task in heard} == {mine}
        assert heard[-1]["status"] == "completed"
        assert heard[-1] == await client.got(mine)
        assert heard[-1]["result"]["structuredContent"]["data"]["imported"] == 250


async def test_a_running_import_is_heard_working_then_cancelled_by_a_third_call(backend: Backend) -> None:
    async with client_of(backend) as client:
        running = await client.start_import("alice", 1000)
        async with client.listen("alice", [running]) as stream:
            assert (await stream.next())["params"]["notifications"] == {"taskIds": [running]}
            now = await stream.next()  # its state when the stream opened
            assert (now["params"]["taskId"], now["params"]["status"]) == (running, "working")
            cancelled = await client.call(EXECUTE, "cancel_execution", "alice", execution_id=running)
            assert cancelled["structuredContent"]["success"], cancelled
            heard = await task_until_end(stream)
        # One notification for the one status change: the batches before it told nothing.
        assert [task["status"] for task in heard] == ["cancelled"]
        assert heard[-1] == await client.got(running)


async def test_an_agent_runs_end_is_told_to_the_listen_stream(backend: Backend) -> None:
    async with client_of(backend) as client:
        started = await client.call(EXECUTE, "execute_agent", "alice", element_name="builder")
        run = str(started["taskId"])
        async with client.listen("alice", [run]) as stream:
            assert (await stream.next())["params"]["notifications"] == {"taskIds": [run]}
            assert (await stream.next())["params"]["status"] == "working"
            done = await client.call(EXECUTE, "complete_execution", "alice", element_name="builder", execution_id=run)
            assert done["structuredContent"]["success"], done
            heard = await task_until_end(stream)
        assert [task["status"] for task in heard] == ["completed"]
        assert heard[-1] == await client.got(run)
