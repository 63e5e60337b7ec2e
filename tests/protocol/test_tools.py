"""`protocol/tools.py` through the real app, in process: what a tool declares it needs of the client."""

from __future__ import annotations

from pathlib import Path

import pytest

from aql_mcp.auth.dev_issuer import DevIssuer
from tests.support.asgi import asgi_client, dev_settings, open_session, rpc

pytestmark = pytest.mark.anyio


async def test_a_legacy_call_without_a_declared_need_is_a_tool_error_before_the_handler_runs(tmp_path: Path) -> None:
    """MCP 2025-11-25 elicitation ("Capabilities": a server MUST NOT send elicitation requests to a
    client that did not declare it): the tool's `client_capabilities` is checked before the
    handler, so the answer is one JSON tool error, with no progress sent before it."""
    settings = dev_settings(tmp_path)
    issuer = DevIssuer(state_dir=settings.store.path, issuer=settings.issuer, audience=settings.audience)
    token = issuer.mint(subject="tester", scopes=["mcp"], ttl=600)
    async with asgi_client(settings) as http:
        session = await open_session(http, token)
        params = {"name": "test_streaming_elicitation", "arguments": {}, "_meta": {"progressToken": 1}}
        response = await http.post("/mcp", json=rpc("tools/call", params, 4), headers=session)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/json")
    result = response.json()["result"]
    assert result["isError"] is True
    assert "elicitation" in result["content"][0]["text"]
