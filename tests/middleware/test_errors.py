"""The outermost layer: an unexpected exception is a JSON-RPC 500, never a stack trace (corporate §13.3)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

from aql_mcp.middleware.errors import ServerErrorMiddleware
from aql_mcp.middleware.request_id import RequestIdMiddleware

pytestmark = pytest.mark.anyio

SECRET = "secret /etc/passwd"


async def explode(request: Request) -> Response:
    raise RuntimeError(SECRET)


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    # The same order as create_app: the request id outermost, so that even a 500 carries it.
    app = Starlette(
        routes=[Route("/boom", explode)],
        middleware=[Middleware(RequestIdMiddleware), Middleware(ServerErrorMiddleware)],
    )
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        yield client


async def test_unhandled_exception_is_a_json_500_without_its_text(http: httpx.AsyncClient) -> None:
    response = await http.get("/boom", headers={"x-request-id": "trace-me-1"})
    assert response.status_code == 500
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert body["jsonrpc"] == "2.0"
    assert body["error"]["code"] == -32603
    assert body["error"]["data"]["requestId"] == "trace-me-1"
    for leak in (SECRET, "/etc/passwd", "RuntimeError", "Traceback", ".py"):
        assert leak not in response.text


async def test_unhandled_exception_answer_carries_the_request_id_header(http: httpx.AsyncClient) -> None:
    """Corporate §15.1 / Appendix C.2: X-Request-Id is returned on every response."""
    response = await http.get("/boom", headers={"x-request-id": "trace-me-2"})
    assert response.status_code == 500
    assert response.headers.get("x-request-id") == "trace-me-2"


async def test_exception_after_the_response_started_is_not_answered_twice() -> None:
    """Starlette middleware/errors.py: once headers are out, the error can only end the exchange."""

    async def half_then_crash(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"partial", "more_body": True})
        raise RuntimeError(SECRET)

    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "GET", "path": "/", "headers": []}
    await ServerErrorMiddleware(half_then_crash)(scope, receive, send)
    assert [m["type"] for m in sent].count("http.response.start") == 1
    assert all(SECRET.encode() not in m.get("body", b"") for m in sent)


async def test_non_http_scopes_pass_through() -> None:
    seen: list[str] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        seen.append(scope["type"])

    async def receive() -> Message:
        return {"type": "lifespan.startup"}

    async def send(message: Message) -> None:
        return None

    await ServerErrorMiddleware(app)({"type": "lifespan"}, receive, send)
    assert seen == ["lifespan"]
