"""A `subscriptions/listen` stream as a test holds it: the request, then its messages one by one."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import orjson
from anyio.streams.memory import MemoryObjectReceiveStream
from starlette.types import ASGIApp, Message

from tests.support.modern import MODERN, modern_body, modern_headers
from tests.support.sse import iter_events

LISTEN = "subscriptions/listen"
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientInfo": {"name": "listen-test", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
DEADLINE = 10.0


class ListenStream:
    """An open listen answer; `next()` is its next JSON-RPC message, within the deadline."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self._events = iter_events(response)

    async def next(self, seconds: float = DEADLINE) -> dict[str, Any]:
        with anyio.fail_after(seconds):
            async for event in self._events:
                if event.data:
                    return event.message
        raise AssertionError("the listen stream ended")

    async def rest(self, seconds: float = DEADLINE) -> list[dict[str, Any]]:
        """Every message until the server ends the stream."""
        with anyio.fail_after(seconds):
            return [event.message async for event in self._events if event.data]


def listen_body(notifications: Any, message_id: int | str = 7) -> Any:
    return modern_body(LISTEN, {"notifications": notifications}, META, message_id)


@asynccontextmanager
async def open_listen(
    http: httpx.AsyncClient, url: str, token: str, notifications: Any, message_id: int | str = 7
) -> AsyncIterator[ListenStream]:
    """Listen, and hold the stream until the block ends (closing it is the client's cancellation)."""
    body = listen_body(notifications, message_id)
    async with http.stream("POST", url, json=body, headers=modern_headers(token, LISTEN)) as response:
        yield ListenStream(response)


async def call_tool(http: httpx.AsyncClient, url: str, token: str, name: str, message_id: int = 50) -> httpx.Response:
    body = modern_body("tools/call", {"name": name, "arguments": {}}, META, message_id)
    return await http.post(url, json=body, headers=modern_headers(token, "tools/call", name))


class AppStream:
    """A listen answer of an app called in process, held open: its JSON-RPC messages one by one.
    httpx's ASGI transport reads a whole answer before returning it, so a stream that stays open is
    read straight from the app's `send`."""

    def __init__(self, chunks: MemoryObjectReceiveStream[bytes]) -> None:
        self.status = 0
        self._chunks = chunks
        self._buffer = b""

    async def next(self, seconds: float = DEADLINE) -> dict[str, Any]:
        with anyio.fail_after(seconds):
            while True:
                event, separator, rest = self._buffer.partition(b"\n\n")
                if separator:
                    self._buffer = rest
                    data = [line[5:].strip() for line in event.split(b"\n") if line.startswith(b"data:")]
                    if data:
                        message: dict[str, Any] = orjson.loads(b"\n".join(data))
                        return message
                    continue  # a keep-alive comment
                self._buffer += await self._chunks.receive()


@asynccontextmanager
async def app_listen(app: ASGIApp, body: Any, headers: dict[str, str]) -> AsyncIterator[AppStream]:
    """POST `body` to the app's `/mcp` and hold the answer until the block ends, then disconnect
    (the client's cancellation of a listen)."""
    writer, reader = anyio.create_memory_object_stream[bytes](1000)
    stream = AppStream(reader)
    disconnected = anyio.Event()
    pending = [orjson.dumps(body)]

    async def receive() -> Message:
        if pending:
            return {"type": "http.request", "body": pending.pop(), "more_body": False}
        await disconnected.wait()
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        if message["type"] == "http.response.start":
            stream.status = message["status"]
        elif message.get("body"):
            await writer.send(message["body"])

    fields = [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in headers.items()]
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/mcp",
        "raw_path": b"/mcp",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1:8000"), *fields],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }
    async with anyio.create_task_group() as group:
        group.start_soon(app, scope, receive, send)
        try:
            yield stream
        finally:
            disconnected.set()
