"""The MCP-AQL endpoint tools mirror `operation` into `Mcp-Param-Operation` (SEP-2243; issue 23,
docs/gateway.md "Per-operation policy"): a modern single-operation call must carry the header and
agree with its body; a batch has no top-level `operation`, so it carries none. In process, through
the real app's modern edge."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from aql_mcp.auth.dev_issuer import DevIssuer
from aql_mcp.settings import Settings
from tests.support.asgi import asgi_client, dev_settings
from tests.support.modern import MODERN, modern_body, modern_error, modern_headers

pytestmark = pytest.mark.anyio
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientInfo": {"name": "operation-header", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
LIST = {"operation": "list_collections", "params": {}}


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return dev_settings(tmp_path, aql={"mode": "all"})


@pytest.fixture
async def client(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(settings) as http:
        yield http


@pytest.fixture
def token(settings: Settings) -> str:
    issuer = DevIssuer(state_dir=settings.store.path, issuer=settings.issuer, audience=settings.audience)
    return issuer.mint(subject="tester", scopes=["mcp"], ttl=600)


async def call(
    client: httpx.AsyncClient, token: str, tool: str, arguments: dict[str, Any], header: str | None
) -> httpx.Response:
    """A modern `tools/call` carrying `Mcp-Param-Operation: header` (none when None)."""
    headers = modern_headers(token, "tools/call", tool)
    if header is not None:
        headers["mcp-param-operation"] = header
    body = modern_body("tools/call", {"name": tool, "arguments": arguments}, META, 41)
    return await client.post("/mcp", json=body, headers=headers)


def envelope(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()["result"]["structuredContent"]
    return result


async def test_every_endpoint_tool_declares_the_operation_header(client: httpx.AsyncClient, token: str) -> None:
    body = modern_body("tools/list", {}, META, 41)
    response = await client.post("/mcp", json=body, headers=modern_headers(token, "tools/list"))
    tools = {tool["name"]: tool for tool in response.json()["result"]["tools"]}
    endpoint_tools = [name for name in tools if name == "mcp_aql" or name.startswith("mcp_aql_")]
    assert "mcp_aql" in endpoint_tools
    assert "mcp_aql_read" in endpoint_tools
    for name in endpoint_tools:
        declared = tools[name]["inputSchema"]["properties"]["operation"]
        assert declared["x-mcp-header"] == "Operation", name
        assert declared["type"] == "string"
        # The batch items' `operation` sits under `items`: not mirrored (nor may it be).
        assert "x-mcp-header" not in tools[name]["inputSchema"]["properties"]["operations"]["items"]["properties"]


async def test_a_single_operation_with_its_header_runs(client: httpx.AsyncClient, token: str) -> None:
    assert envelope(await call(client, token, "mcp_aql_read", LIST, "list_collections"))["success"] is True


@pytest.mark.parametrize("header", [None, "introspect", "List_Collections"])
async def test_a_single_operation_without_its_header_or_with_another_is_refused(
    client: httpx.AsyncClient, token: str, header: str | None
) -> None:
    """2026-07-28 Streamable HTTP, "Server Behavior for Custom Headers": a value in the body wants
    the header, and the header must render it exactly."""
    error = modern_error(await call(client, token, "mcp_aql_read", LIST, header), 400, -32020)
    assert error["data"]["header"] == "Mcp-Param-Operation"


async def test_the_header_may_be_base64_encoded(client: httpx.AsyncClient, token: str) -> None:
    """A gateway must decode it too, or refuse the encoded form (docs/gateway.md)."""
    encoded = "=?base64?bGlzdF9jb2xsZWN0aW9ucw==?="  # list_collections
    assert envelope(await call(client, token, "mcp_aql_read", LIST, encoded))["success"] is True


async def test_a_batch_carries_no_header_and_runs(client: httpx.AsyncClient, token: str) -> None:
    batch = {"operations": [LIST, {"operation": "introspect", "params": {"query": "operations"}}]}
    result = envelope(await call(client, token, "mcp_aql", batch, None))
    assert result["summary"] == {"total": 2, "succeeded": 2, "failed": 0}


async def test_a_batch_naming_an_operation_in_the_header_is_refused(client: httpx.AsyncClient, token: str) -> None:
    """No top-level `operation`, so no header: one naming a harmless operation would let a gateway
    pass a batch it would have refused."""
    batch = {"operations": [LIST]}
    modern_error(await call(client, token, "mcp_aql", batch, "list_collections"), 400, -32020)
