"""The request body limit (corporate §14: payload too large is -32005 / HTTP 413)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import orjson
import pytest
from starlette.types import Message, Receive, Scope, Send

from aql_mcp.auth.dev_issuer import DevIssuer
from aql_mcp.middleware.limits import BodyLimitMiddleware
from aql_mcp.settings import Settings
from tests.support.asgi import MCP_HEADERS, asgi_client, dev_settings, open_session, rpc

pytestmark = pytest.mark.anyio

LIMIT = 2048


@pytest.fixture
def limited(tmp_path: Path) -> Settings:
    return dev_settings(tmp_path, http={"max_body_bytes": LIMIT})


@pytest.fixture
def token(limited: Settings) -> str:
    issuer = DevIssuer(state_dir=limited.store.path, issuer=limited.issuer, audience=limited.audience)
    return issuer.mint(subject="tester", scopes=["mcp"], ttl=600)


@pytest.fixture
async def http(limited: Settings) -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(limited) as client:
        yield client


def padded_ping(size: int) -> bytes:
    """A valid ping whose body is exactly `size` bytes."""
    empty = orjson.dumps(rpc("ping", {"_meta": {"pad": ""}}))
    return orjson.dumps(rpc("ping", {"_meta": {"pad": "x" * (size - len(empty))}}))


def assert_too_large(response: httpx.Response, token: str) -> None:
    assert response.status_code == 413, response.text
    error: dict[str, Any] = response.json()["error"]
    assert error["code"] == -32005
    assert error["data"]["limit"] == "request_body"
    assert error["data"]["maxBytes"] == LIMIT
    assert error["data"]["requestId"] == response.headers["x-request-id"]
    assert token not in response.text
    assert "Traceback" not in response.text


async def test_body_over_the_declared_limit_is_413(http: httpx.AsyncClient, token: str) -> None:
    session = await open_session(http, token)
    response = await http.post("/mcp", content=padded_ping(LIMIT + 1), headers=session)
    assert_too_large(response, token)


async def test_declared_oversize_body_is_413_before_authentication(http: httpx.AsyncClient, token: str) -> None:
    response = await http.post("/mcp", content=padded_ping(4 * LIMIT), headers=MCP_HEADERS)
    assert_too_large(response, token)


async def test_chunked_body_over_the_limit_is_413(http: httpx.AsyncClient, token: str) -> None:
    """No Content-Length: the bytes are counted as they arrive."""
    session = await open_session(http, token)

    async def chunks() -> AsyncIterator[bytes]:
        body = padded_ping(4 * LIMIT)
        for start in range(0, len(body), 512):
            yield body[start : start + 512]

    response = await http.post("/mcp", content=chunks(), headers=session)
    assert "content-length" not in response.request.headers
    assert_too_large(response, token)


async def test_body_at_the_limit_is_served(http: httpx.AsyncClient, token: str) -> None:
    session = await open_session(http, token)
    response = await http.post("/mcp", content=padded_ping(LIMIT), headers=session)
    assert response.status_code == 200, response.text
    assert response.json()["result"] == {}


async def test_chunked_body_under_the_limit_is_served(http: httpx.AsyncClient, token: str) -> None:
    session = await open_session(http, token)

    async def chunks() -> AsyncIterator[bytes]:
        body = padded_ping(LIMIT - 100)
        for start in range(0, len(body), 256):
            yield body[start : start + 256]

    response = await http.post("/mcp", content=chunks(), headers=session)
    assert response.status_code == 200, response.text
    assert response.json()["result"] == {}


async def test_oversize_chunked_body_is_not_read_to_its_end(http: httpx.AsyncClient, token: str) -> None:
    """Counted as it arrives: the body stops being read soon after the limit (corporate §14)."""
    session = await open_session(http, token)
    pulled = 0

    async def endless() -> AsyncIterator[bytes]:
        nonlocal pulled
        for _ in range(10_000):
            pulled += 1
            yield b" " * 256

    response = await http.post("/mcp", content=endless(), headers=session)
    assert_too_large(response, token)
    assert pulled * 256 <= LIMIT + 2 * 256


async def test_default_limit_is_one_megabyte(client: httpx.AsyncClient) -> None:
    """Corporate §14: input payload size, 1 MB by default."""
    response = await client.post("/mcp", content=b" " * (1_048_576 + 1), headers=MCP_HEADERS)
    assert response.status_code == 413
    error = response.json()["error"]
    assert error["code"] == -32005
    assert error["data"]["maxBytes"] == 1_048_576


# The body's pace (issue 12): once the app reads, the whole body has `timeout_seconds` to arrive.


async def read_all(scope: Scope, receive: Receive, send: Send) -> None:
    """Reads the body, then waits for the client to go away, as an SSE stream does."""
    more = True
    while more:
        more = (await receive()).get("more_body", False)
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"", "more_body": True})
    assert (await receive())["type"] == "http.disconnect"
    await send({"type": "http.response.body", "body": b""})


async def run_paced(chunks: list[tuple[float, Message]], limit: float) -> list[Message]:
    """Run `read_all` behind the middleware; `receive` hands out `chunks` after their delays."""
    sent: list[Message] = []
    queue = list(chunks)
    refusals: list[str] = []

    async def receive() -> Message:
        delay, message = queue.pop(0)
        await anyio.sleep(delay)
        return message

    async def send(message: Message) -> None:
        sent.append(message)

    middleware = BodyLimitMiddleware(read_all, max_bytes=LIMIT, timeout_seconds=limit, on_refusal=refusals.append)
    scope = {"type": "http", "method": "POST", "path": "/", "headers": []}
    with anyio.fail_after(10):
        await middleware(scope, receive, send)
    return sent


async def test_a_body_that_arrives_within_the_deadline_is_served() -> None:
    chunks = [(0.0, {"type": "http.request", "body": b"a", "more_body": True})] * 3
    chunks += [(0.0, {"type": "http.request", "body": b"a", "more_body": False}), (0.0, {"type": "http.disconnect"})]
    sent = await run_paced(chunks, limit=5.0)
    assert sent[0]["status"] == 200


async def test_a_body_slower_than_the_deadline_is_408_and_closes_the_connection() -> None:
    chunks = [(0.0, {"type": "http.request", "body": b"a", "more_body": True}), (5.0, {"type": "http.disconnect"})]
    sent = await run_paced(chunks, limit=0.2)
    assert sent[0]["status"] == 408
    assert (b"connection", b"close") in sent[0]["headers"]
    error = orjson.loads(sent[1]["body"])["error"]
    assert error["code"] == -32004
    assert error["data"]["limit"] == "request_body"


async def test_waiting_for_a_disconnect_after_the_body_has_no_deadline() -> None:
    chunks = [(0.0, {"type": "http.request", "body": b"a", "more_body": False}), (0.5, {"type": "http.disconnect"})]
    sent = await run_paced(chunks, limit=0.1)
    assert sent[0]["status"] == 200
    assert sent[-1] == {"type": "http.response.body", "body": b""}
