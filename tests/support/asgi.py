"""The app in-process, for unit-level checks of JSON answers (no streaming)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx

from aql_mcp.app import create_app
from aql_mcp.settings import Settings

PORT = 8000
BASE = f"http://127.0.0.1:{PORT}"
MCP_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
CONFORMANCE = "aql_mcp.testing.conformance:plugin"


def dev_settings(state: Path, **sections: Mapping[str, Any]) -> Settings:
    """Development-mode settings on a private state directory, with the conformance fixtures."""
    data: dict[str, dict[str, Any]] = {
        "server": {"dev": True, "port": PORT, "plugins": [CONFORMANCE], "entry_point_plugins": False},
        "store": {"path": state},
        "logging": {"level": "warning"},
    }
    for name, values in sections.items():
        data.setdefault(name, {}).update(values)
    return Settings(**data)


@asynccontextmanager
async def asgi_client(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=BASE) as http:
            yield http


def rpc(method: str, params: dict[str, Any] | None = None, message_id: int | str | None = 1) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    if message_id is not None:
        message["id"] = message_id
    return message


def initialize_params(version: str = "2025-11-25", capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "protocolVersion": version,
        "capabilities": capabilities or {},
        "clientInfo": {"name": "aql-mcp-tests", "version": "1"},
    }


async def open_session(http: httpx.AsyncClient, token: str, version: str = "2025-11-25") -> dict[str, str]:
    """Initialize a session; return the headers every later request of it carries."""
    headers = {**MCP_HEADERS, "authorization": f"Bearer {token}"}
    response = await http.post("/mcp", json=rpc("initialize", initialize_params(version)), headers=headers)
    assert response.status_code == 200, response.text
    session = {**headers, "mcp-session-id": response.headers["mcp-session-id"], "mcp-protocol-version": version}
    done = await http.post("/mcp", json=rpc("notifications/initialized", message_id=None), headers=session)
    assert done.status_code == 202
    return session
