"""The core's legacy tasks extension point (protocol/task_mapping.py): a plugin's task mapper is
consulted by the core's own `tools/list` and `tools/call`, only for a legacy session that declared
`tasks`, and its `tasks/*` methods join the legacy method table."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from aql_mcp.app import create_app
from aql_mcp.auth.dev_issuer import DevIssuer
from aql_mcp.exceptions import ConfigError, InvalidParams
from aql_mcp.protocol.context import Context
from aql_mcp.protocol.primitives import Registry, Tool
from aql_mcp.protocol.task_mapping import TaskHandler
from tests.support.asgi import BASE, MCP_HEADERS, dev_settings, initialize_params, rpc

pytestmark = pytest.mark.anyio
HERE = "tests.protocol.test_task_mapping:plugin"


@dataclass
class JobMapper:
    """Runs `job` calls as tasks: `begin` marks the call, `finish` answers a task of its result."""

    seen: list[str] = field(default_factory=list)

    @property
    def capability(self) -> dict[str, Any]:
        return {"list": {}}

    def task_tools(self) -> set[str]:
        return {"job"}

    def begin(self, params: dict[str, Any], ctx: Context) -> None:
        if params["arguments"].get("refuse"):
            raise InvalidParams(data={"field": "task", "reason": "refused"})
        ctx.memo["as_task"] = True
        self.seen.append("begin")

    async def finish(self, result: dict[str, Any], ctx: Context) -> dict[str, Any]:
        self.seen.append("finish")
        return {"task": {"taskId": "t1", "status": "working", "ran": result["content"][0]["text"]}}

    def methods(self) -> dict[str, TaskHandler]:
        async def get(params: dict[str, Any], ctx: Context) -> dict[str, Any]:
            return {"taskId": params.get("taskId"), "status": "completed"}

        return {"tasks/get": get}


@dataclass
class JobPlugin:
    name: str = "jobs"
    mapper: JobMapper = field(default_factory=JobMapper)

    def register(self, registry: Registry) -> None:
        async def job(arguments: dict[str, Any], ctx: Context) -> str:
            return "as task" if ctx.memo.get("as_task") else "plain"

        registry.add_tool(Tool("job", "A job that may run as a task", job))
        registry.add_tool(Tool("other", "Never a task", job))

    def task_mapper(self) -> JobMapper:
        return self.mapper


plugin = JobPlugin()


@pytest.fixture
async def http(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    plugin.mapper.seen.clear()
    settings = dev_settings(tmp_path, server={"plugins": [HERE], "builtin_plugins": []})
    app = create_app(settings)
    token = DevIssuer(state_dir=tmp_path, issuer=settings.issuer, audience=settings.audience).mint(
        subject="jobs", scopes=["mcp"], ttl=600
    )
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=BASE) as client:
            client.headers["authorization"] = f"Bearer {token}"
            yield client


async def session(http: httpx.AsyncClient, capabilities: dict[str, Any]) -> tuple[dict[str, str], dict[str, Any]]:
    response = await http.post(
        "/mcp", json=rpc("initialize", initialize_params(capabilities=capabilities)), headers=MCP_HEADERS
    )
    assert response.status_code == 200, response.text
    headers = {
        **MCP_HEADERS,
        "mcp-session-id": response.headers["mcp-session-id"],
        "mcp-protocol-version": "2025-11-25",
    }
    await http.post("/mcp", json=rpc("notifications/initialized", message_id=None), headers=headers)
    return headers, response.json()["result"]


async def call(http: httpx.AsyncClient, headers: dict[str, str], method: str, params: dict[str, Any]) -> dict[str, Any]:
    response = await http.post("/mcp", json=rpc(method, params), headers=headers)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def test_a_session_that_declared_tasks_gets_the_mapper_around_the_core_call(http: httpx.AsyncClient) -> None:
    headers, initialized = await session(http, {"tasks": {}})
    assert initialized["capabilities"]["tasks"] == {"list": {}}
    listed = (await call(http, headers, "tools/list", {}))["result"]["tools"]
    assert {tool["name"]: tool.get("execution") for tool in listed} == {
        "job": {"taskSupport": "optional"},
        "other": None,
    }
    created = await call(http, headers, "tools/call", {"name": "job", "arguments": {}, "task": {}})
    assert created["result"] == {"task": {"taskId": "t1", "status": "working", "ran": "as task"}}
    assert plugin.mapper.seen == ["begin", "finish"]
    assert (await call(http, headers, "tasks/get", {"taskId": "t1"}))["result"]["status"] == "completed"


async def test_the_core_checks_the_task_request_before_the_mapper_sees_it(http: httpx.AsyncClient) -> None:
    headers, _ = await session(http, {"tasks": {}})
    not_object = await call(http, headers, "tools/call", {"name": "job", "arguments": {}, "task": 1})
    assert not_object["error"]["code"] == -32602
    no_support = await call(http, headers, "tools/call", {"name": "other", "arguments": {}, "task": {}})
    assert no_support["error"]["code"] == -32601
    refused = await call(http, headers, "tools/call", {"name": "job", "arguments": {"refuse": True}, "task": {}})
    assert refused["error"]["data"]["reason"] == "refused"
    assert plugin.mapper.seen == []


async def test_without_the_capability_task_is_ignored_and_the_tools_list_plain(http: httpx.AsyncClient) -> None:
    headers, initialized = await session(http, {})
    assert "tasks" not in initialized["capabilities"]
    listed = (await call(http, headers, "tools/list", {}))["result"]["tools"]
    assert all("execution" not in tool for tool in listed)
    plain = await call(http, headers, "tools/call", {"name": "job", "arguments": {}, "task": {}})
    assert plain["result"]["content"][0]["text"] == "plain"
    assert plugin.mapper.seen == []


def test_two_plugins_that_map_legacy_tasks_are_refused(tmp_path: Path) -> None:
    # The built-in executions plugin maps tasks onto executions; this plugin would map them too.
    settings = dev_settings(tmp_path, server={"plugins": [HERE]})
    with pytest.raises(ConfigError, match="at most one plugin"):
        create_app(settings)
