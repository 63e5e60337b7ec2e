"""A `subscriptions/listen` stream as a test holds it: the request, then its messages one by one."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx

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
