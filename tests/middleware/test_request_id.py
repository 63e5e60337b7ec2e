"""X-Request-Id on every response (corporate §15.1); echo and replacement are in
tests/endpoint/legacy/test_transport.py."""

from __future__ import annotations

import httpx
import pytest

from tests.support.asgi import MCP_HEADERS, rpc

pytestmark = pytest.mark.anyio


async def test_responses_before_authentication_carry_a_request_id(client: httpx.AsyncClient) -> None:
    probe = await client.get("/health")
    refused = await client.post("/mcp", json=rpc("ping"), headers=MCP_HEADERS)
    assert probe.headers["x-request-id"]
    assert refused.status_code == 401
    assert refused.headers["x-request-id"] == refused.json()["error"]["data"]["requestId"]


async def test_each_request_without_an_id_gets_a_fresh_one(client: httpx.AsyncClient) -> None:
    first = await client.get("/health")
    second = await client.get("/health")
    assert first.headers["x-request-id"] != second.headers["x-request-id"]


async def test_request_id_of_128_safe_characters_is_kept(client: httpx.AsyncClient) -> None:
    offered = "a1._:@/+=-" * 12 + "abcdefgh"
    assert len(offered) == 128
    response = await client.get("/health", headers={"x-request-id": offered})
    assert response.headers["x-request-id"] == offered
