"""`Connection: close` on every answer while the replica drains (middleware/drain.py;
docs/connections.md, "Rolling restarts"), in process. tests/server/test_drain.py shows what it
does to a real connection."""

from __future__ import annotations

import httpx
import pytest
from starlette.types import Receive, Scope, Send

from aql_mcp.app import create_app
from aql_mcp.middleware.drain import DrainMiddleware
from aql_mcp.settings import Settings
from tests.support.asgi import BASE, MCP_HEADERS, rpc

pytestmark = pytest.mark.anyio


async def test_every_answer_says_connection_close_once_the_replica_drains(settings: Settings) -> None:
    app = create_app(settings)
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE)
    async with app.router.lifespan_context(app), http:
        before = await http.get("/health")
        app.state.services.probes.draining = True
        health = await http.get("/health")
        ready = await http.get("/ready")
        refused = await http.post("/mcp", json=rpc("tools/list"), headers=MCP_HEADERS)

    assert "connection" not in before.headers
    assert health.status_code == 200
    assert (ready.status_code, refused.status_code) == (503, 401)
    assert health.headers["connection"] == ready.headers["connection"] == refused.headers["connection"] == "close"


async def keep_alive_app(scope: Scope, receive: Receive, send: Send) -> None:
    headers = [(b"content-length", b"2"), (b"Connection", b"keep-alive")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b"ok"})


@pytest.mark.parametrize("draining", [False, True])
async def test_the_drain_overrides_what_the_app_said_and_nothing_else(draining: bool) -> None:
    app = DrainMiddleware(keep_alive_app, draining=lambda: draining)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as http:
        response = await http.get("/")

    connection = [value for name, value in response.headers.multi_items() if name == "connection"]
    assert connection == (["close"] if draining else ["keep-alive"])
    assert response.text == "ok"
