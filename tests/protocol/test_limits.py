"""Tool call limits inside JSON-RPC handling (corporate §14, §12.2): timeout, result size, scopes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import orjson
import pytest

from aql_mcp.auth.dev_issuer import DevIssuer
from aql_mcp.protocol.context import Context
from aql_mcp.protocol.primitives import Registry, Tool, ToolResult
from tests.support.asgi import asgi_client, dev_settings, open_session, rpc

pytestmark = pytest.mark.anyio


class LimitsPlugin:
    """Tools that run long, answer big, and record whether they were cancelled."""

    name = "limits-fixture"

    def __init__(self) -> None:
        self.cancelled = anyio.Event()

    def register(self, registry: Registry) -> None:
        registry.add_tool(Tool("slow_tool", "Sleeps until cancelled", self.slow))
        registry.add_tool(Tool("big_text", "Answers 300 KB of text", self.big_text))
        registry.add_tool(Tool("big_structured", "Answers big structured content", self.big_structured))
        registry.add_tool(Tool("guarded_tool", "Needs the scope 'records:write'", self.big_text))

    async def slow(self, arguments: dict[str, Any], ctx: Context) -> str:
        try:
            await anyio.sleep(30)
        except anyio.get_cancelled_exc_class():
            self.cancelled.set()
            raise
        return "finished"

    async def big_text(self, arguments: dict[str, Any], ctx: Context) -> str:
        return "é" * 150_000

    async def big_structured(self, arguments: dict[str, Any], ctx: Context) -> ToolResult:
        rows = [{"id": i, "text": "x" * 100} for i in range(3000)]
        return ToolResult([{"type": "text", "text": orjson.dumps(rows).decode()}], structured={"rows": rows})


plugin = LimitsPlugin()


@pytest.fixture
async def http(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    settings = dev_settings(
        tmp_path,
        server={"plugins": ["aql_mcp.testing.conformance:plugin", "tests.protocol.test_limits:plugin"]},
        limits={"tool_timeout_seconds": 0.2, "max_result_bytes": 65536},
        auth={"policy": {"tools": {"guarded_tool": ["records:write"]}, "resources": {"test://*": ["secret"]}}},
    )
    async with asgi_client(settings) as client:
        client.headers["x-state"] = str(tmp_path)
        yield client


async def session_for(http: httpx.AsyncClient, scopes: list[str]) -> dict[str, str]:
    settings_state = Path(http.headers["x-state"])
    issuer = DevIssuer(state_dir=settings_state, issuer="http://127.0.0.1:8000", audience="http://127.0.0.1:8000/mcp")
    return await open_session(http, issuer.mint(subject="limits", scopes=scopes, ttl=600))


async def call(http: httpx.AsyncClient, headers: dict[str, str], name: str) -> httpx.Response:
    return await http.post("/mcp", json=rpc("tools/call", {"name": name, "arguments": {}}), headers=headers)


async def test_a_tool_over_its_time_limit_is_cancelled_and_answered_504_with_32004(http: httpx.AsyncClient) -> None:
    """Corporate §14: timeout -> -32004 / HTTP 504; the cancellation reaches the handler."""
    headers = await session_for(http, ["mcp"])
    with anyio.fail_after(5):
        response = await call(http, headers, "slow_tool")
        await plugin.cancelled.wait()
    assert response.status_code == 504
    assert response.json()["error"]["code"] == -32004
    assert (await http.post("/mcp", json=rpc("ping"), headers=headers)).status_code == 200


async def test_a_text_result_over_the_size_limit_is_truncated_with_a_visible_notice(http: httpx.AsyncClient) -> None:
    """Corporate §12.2 and §14: truncation with an explicit flag, never a silent cut."""
    response = await call(http, await session_for(http, ["mcp"]), "big_text")
    assert response.status_code == 200
    assert len(response.content) <= 65536
    content = response.json()["result"]["content"]
    assert content[0]["text"].startswith("é")
    assert "truncated" in content[-1]["text"].lower()


async def test_structured_content_over_the_size_limit_says_truncated_true(http: httpx.AsyncClient) -> None:
    response = await call(http, await session_for(http, ["mcp"]), "big_structured")
    result = response.json()["result"]
    assert len(response.content) <= 65536
    assert result["structuredContent"]["truncated"] is True
    assert "truncated" in result["content"][-1]["text"].lower()


async def test_a_tool_the_token_lacks_the_scope_for_is_an_is_error_result_naming_it(http: httpx.AsyncClient) -> None:
    response = await call(http, await session_for(http, ["mcp"]), "guarded_tool")
    result = response.json()["result"]
    assert result["isError"] is True
    assert "records:write" in result["content"][0]["text"]


async def test_a_tool_is_called_when_the_token_has_its_scope(http: httpx.AsyncClient) -> None:
    response = await call(http, await session_for(http, ["mcp", "records:write"]), "big_text")
    assert "isError" not in response.json()["result"]


async def test_a_resource_the_token_lacks_the_scope_for_is_an_in_band_insufficient_scope_error(
    http: httpx.AsyncClient,
) -> None:
    headers = await session_for(http, ["mcp"])
    response = await http.post("/mcp", json=rpc("resources/read", {"uri": "test://static-text"}), headers=headers)
    assert response.status_code == 200
    error = response.json()["error"]
    assert error["data"]["reason"] == "insufficient_scope"
    assert error["data"]["scope"] == "secret"
