"""A resource URI holding NUL or another control character (found by tests/hostile/test_fuzz.py on
PostgreSQL: `resources/unsubscribe` with `"a\\u0000b"` reached a text column that refuses NUL, a 503).

RFC 3986 §2: no URI holds a control character, so every resource method refuses one as -32602
naming `uri`, before any lookup or store access, on both engines.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.support.asgi import MCP_HEADERS
from tests.support.server import start_server

INIT = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def http(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    env = {"AQL_MCP_STORE__URL": request.getfixturevalue("database")} if request.param == "postgres" else {}
    with start_server(tmp_path_factory.mktemp("nul"), env=env, plugins=()) as server:
        headers = {**MCP_HEADERS, "authorization": f"Bearer {server.token()}"}
        with httpx.Client(base_url=server.base, headers=headers, timeout=30.0) as client:
            response = client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT})
            client.headers["mcp-session-id"] = response.headers["mcp-session-id"]
            client.headers["mcp-protocol-version"] = "2025-11-25"
            yield client


@pytest.mark.parametrize("method", ["resources/unsubscribe", "resources/subscribe", "resources/read"])
@pytest.mark.parametrize("uri", ["a\x00b", "use://auth\x00", "doc://readme\n", "x\x7f"])
def test_a_uri_with_a_control_character_is_invalid_params_naming_uri(http: httpx.Client, method: str, uri: str) -> None:
    response = http.post("/mcp", json={"jsonrpc": "2.0", "id": 2, "method": method, "params": {"uri": uri}})
    assert response.status_code == 200, response.text
    error: dict[str, Any] = response.json()["error"]
    assert error["code"] == -32602
    assert error["data"]["field"] == "uri"


def test_unsubscribing_from_a_uri_never_subscribed_still_succeeds(http: httpx.Client) -> None:
    body = {"jsonrpc": "2.0", "id": 3, "method": "resources/unsubscribe", "params": {"uri": "use://never"}}
    assert http.post("/mcp", json=body).json()["result"] == {}
