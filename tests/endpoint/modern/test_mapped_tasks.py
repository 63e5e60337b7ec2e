"""The core's 2026-07-28 task mapping extension point (protocol/task_mapping.py `ModernTaskMapper`;
endpoint/modern/task_methods.py), on both store engines: a plugin's mapper is consulted by the core's
`tools/call` only for a modern request that declares the Tasks extension, and `tasks/get`,
`tasks/update`, `tasks/cancel` of an id it owns go to it, while other ids stay the core table's."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from aql_mcp.app import create_app
from aql_mcp.auth.dev_issuer import DevIssuer
from aql_mcp.exceptions import ConfigError, ToolError
from aql_mcp.protocol.context import Context
from aql_mcp.protocol.primitives import Registry, Tool
from tests.support.asgi import BASE, dev_settings
from tests.support.engines import Backend
from tests.support.modern import modern_body, modern_headers
from tests.support.tasks import WITH_TASKS, meta

pytestmark = pytest.mark.anyio
HERE = "tests.endpoint.modern.test_mapped_tasks:plugin"
JOB = {"taskId": "job-1", "status": "working", "createdAt": "2026-01-01T00:00:00.000Z", "ttlMs": 1000}


@dataclass
class JobMapper:
    """Maps `job` calls onto jobs of its own, whose ids start with `job-`; each is Alice's."""

    seen: list[str] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)

    def owns(self, task_id: str) -> bool:
        return task_id.startswith("job-")

    def begin(self, params: dict[str, Any], ctx: Context) -> bool:
        self.seen.append("begin")
        if params.get("name") != "job":
            return False
        ctx.memo["as_task"] = True
        return True

    async def finish(self, result: dict[str, Any], ctx: Context) -> dict[str, Any]:
        self.seen.append("finish")
        if result.get("isError"):
            return result
        return {"resultType": "task", **JOB, "statusMessage": result["content"][0]["text"]}

    async def get(self, task_id: str, ctx: Context) -> dict[str, Any] | None:
        if task_id != JOB["taskId"] or ctx.principal is None or ctx.principal.subject != "alice":
            return None
        status = "cancelled" if task_id in self.cancelled else "completed"
        return {**JOB, "status": status}

    async def cancel(self, task_id: str, ctx: Context) -> bool:
        if await self.get(task_id, ctx) is None:
            return False
        self.cancelled.append(task_id)
        return True


@dataclass
class JobPlugin:
    name: str = "modern-jobs"
    mapper: JobMapper = field(default_factory=JobMapper)

    def register(self, registry: Registry) -> None:
        async def job(arguments: dict[str, Any], ctx: Context) -> str:
            if arguments.get("fail"):
                raise ToolError("refused before any job existed")
            return "as task" if ctx.memo.get("as_task") else "plain"

        registry.add_tool(Tool("job", "A job that may run as a task", job))
        registry.add_tool(Tool("other", "Never a task", job))

    def modern_task_mapper(self) -> JobMapper:
        return self.mapper


plugin = JobPlugin()


@dataclass
class Client:
    http: httpx.AsyncClient
    tokens: DevIssuer

    async def send(self, method: str, params: dict[str, Any], caller: str = "alice", caps: Any = None) -> Any:
        token = self.tokens.mint(subject=caller, scopes=["mcp"], ttl=600)
        name = params.get("name") if method == "tools/call" else params.get("taskId")
        headers = modern_headers(token, method, name)
        return await self.http.post("/mcp", json=modern_body(method, params, meta(caps), 3), headers=headers)

    async def result(self, method: str, params: dict[str, Any], **kw: Any) -> dict[str, Any]:
        response = await self.send(method, params, **kw)
        assert response.status_code == 200, response.text
        result: dict[str, Any] = response.json()["result"]
        return result


@pytest.fixture
async def client(backend: Backend) -> AsyncIterator[Client]:
    plugin.mapper.seen.clear()
    plugin.mapper.cancelled.clear()
    settings = dev_settings(
        backend.path,
        server={"plugins": [HERE], "builtin_plugins": []},
        store={"url": backend.url},
        mcp={"modern_era": True},
    )
    app = create_app(settings)
    tokens = DevIssuer(state_dir=backend.path, issuer=settings.issuer, audience=settings.audience)
    transport = httpx.ASGITransport(app=app)
    async with app.router.lifespan_context(app), httpx.AsyncClient(transport=transport, base_url=BASE) as http:
        yield Client(http, tokens)


async def test_a_request_declaring_the_extension_gets_the_mappers_task_around_the_core_call(client: Client) -> None:
    created = await client.result("tools/call", {"name": "job", "arguments": {}})
    created.pop("_meta")
    assert created == {"resultType": "task", **JOB, "statusMessage": "as task"}
    assert plugin.mapper.seen == ["begin", "finish"]
    other = await client.result("tools/call", {"name": "other", "arguments": {}})
    assert (other["resultType"], other["content"][0]["text"]) == ("complete", "plain")


async def test_a_call_the_tool_refuses_is_the_plain_refusal(client: Client) -> None:
    refused = await client.result("tools/call", {"name": "job", "arguments": {"fail": True}})
    assert (refused["resultType"], refused["isError"]) == ("complete", True)


async def test_without_the_extension_the_mapper_is_never_consulted(client: Client) -> None:
    plain = await client.result("tools/call", {"name": "job", "arguments": {}}, caps={})
    assert (plain["resultType"], plain["content"][0]["text"]) == ("complete", "plain")
    assert plugin.mapper.seen == []
    # Nor are the tasks methods served to such a request: -32021, whoever owns the id.
    refused = await client.send("tasks/get", {"taskId": "job-1"}, caps={})
    assert (refused.status_code, refused.json()["error"]["code"]) == (400, -32021)


async def test_the_tasks_methods_go_to_the_mapper_for_its_ids(client: Client) -> None:
    got = await client.result("tasks/get", {"taskId": "job-1"}, caps=WITH_TASKS)
    assert (got["resultType"], got["status"]) == ("complete", "completed")
    updated = await client.result("tasks/update", {"taskId": "job-1", "inputResponses": {"x": {}}})
    assert updated["resultType"] == "complete"
    assert set(updated) <= {"resultType", "_meta"}
    await client.result("tasks/cancel", {"taskId": "job-1"})
    assert plugin.mapper.cancelled == ["job-1"]
    assert (await client.result("tasks/get", {"taskId": "job-1"}))["status"] == "cancelled"


@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
async def test_an_id_the_mapper_does_not_know_or_another_callers_is_unknown(client: Client, method: str) -> None:
    for caller, task_id in (("bob", "job-1"), ("alice", "job-2"), ("alice", "0" * 32)):
        response = await client.send(method, {"taskId": task_id, "inputResponses": {}}, caller=caller)
        assert response.status_code == 400, response.text
        error = response.json()["error"]
        assert (error["code"], error["data"]["reason"]) == (-32602, "unknown")
    assert plugin.mapper.cancelled == []


def test_two_plugins_that_map_modern_tasks_are_refused(tmp_path: Path) -> None:
    # The built-in executions plugin maps modern tasks onto executions; this plugin would map them too.
    settings = dev_settings(tmp_path, server={"plugins": [HERE]}, mcp={"modern_era": True})
    with pytest.raises(ConfigError, match="2026-07-28 tasks; at most one plugin"):
        create_app(settings)
