"""The Server-Sent Events wire format of the MCP streams, written in this one place.

Every SSE byte the MCP transport sends (2025-11-25 POST and GET streams, the 2026-07-28 replies and
`subscriptions/listen`) is framed here: an event is its `id`, `retry` and `data` fields followed by a
blank line, a comment line starts with a colon (HTML Living Standard, "Server-sent events", event
stream interpretation). The operator console's stream is framed by sse-starlette instead, and
docs/eras.md ("Why the MCP streams do not use sse-starlette") says why these are not. `Connection`
is the open SSE response both eras write these bytes to.

An open stream costs what it holds for as long as it is open, a thousand times over on a busy
replica (docs/connections.md, "What an open stream costs"): so a `Connection` is waited on by the
request's own task (`hold`), not by a watcher task or a task group, and its flag makes no event
until something waits for it.
"""

from __future__ import annotations

import asyncio
import time

from starlette.types import Receive, Send

from aql_mcp.endpoint.flag import Flag

HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    # Proxies (nginx, the corporate gateway) must not buffer the stream.
    (b"x-accel-buffering", b"no"),
]
# A comment: clients ignore it, proxies see traffic on an idle connection and keep it open.
KEEPALIVE = b": keep-alive\n\n"


def format_event(event_id: str | None, data: bytes, retry_ms: int | None = None) -> bytes:
    """One event carrying one JSON-RPC message (`data`), with its resumption id and retry hint when given.

    orjson never emits a raw newline (a newline in a string is escaped), so one data line suffices.
    """
    lines = []
    if event_id is not None:
        lines.append(b"id: " + event_id.encode("ascii"))
    if retry_ms is not None:
        lines.append(b"retry: " + str(retry_ms).encode("ascii"))
    lines.append(b"data: " + data)
    return b"\n".join(lines) + b"\n\n"


def format_retry(retry_ms: int, *, comment: str | None = None) -> bytes:
    """The retry hint alone, before a connection ends: when the client should reconnect, and no event
    (an event here would carry an id the client then resumes from, or an empty message)."""
    prefix = b": " + comment.encode("ascii") + b"\n" if comment is not None else b""
    return prefix + b"retry: " + str(retry_ms).encode("ascii") + b"\n\n"


class Connection:
    """An open SSE response on one HTTP exchange; a `Sink` for an `EventStream`."""

    __slots__ = ("_holder", "_send", "_woken", "ended", "last_write", "standing")

    def __init__(self, send: Send, *, standing: bool = False) -> None:
        self._send = send
        self.standing = standing  # a GET stream, not the answer to one request
        self.ended = Flag()
        self.last_write = time.monotonic()
        self._holder: asyncio.Task[object] | None = None
        self._woken = False

    async def start(self, headers: list[tuple[bytes, bytes]]) -> None:
        await self._send({"type": "http.response.start", "status": 200, "headers": HEADERS + headers})

    async def write(self, chunk: bytes) -> None:
        if self.ended.is_set():
            return
        self.last_write = time.monotonic()
        await self._send({"type": "http.response.body", "body": chunk, "more_body": True})

    async def end(self) -> None:
        if self.ended.is_set():
            return
        self.ended.set()
        await self._send({"type": "http.response.body", "body": b"", "more_body": False})
        self.wake()

    async def hold(self, receive: Receive) -> bool:
        """Wait, in the request's own task, until the client goes away (False) or `wake` or `end`
        is called (True). The task waits for the client's disconnect itself; a wake-up is a
        cancellation of that wait, taken back here, so no second task watches the connection."""
        if self.ended.is_set():
            return True
        task = asyncio.current_task()
        assert task is not None
        self._holder, self._woken = task, False
        try:
            while (await receive())["type"] != "http.disconnect":
                pass
            return False
        except asyncio.CancelledError:
            # Ours alone (no other cancellation pending, e.g. the server's shutdown): a wake-up.
            if self._woken and task.uncancel() == 0:
                return True
            raise
        finally:
            self._holder = None

    def wake(self) -> None:
        """End a `hold` with True (something to write, or the stream ended); nothing if none waits."""
        holder = self._holder
        if holder is not None and not self._woken and holder is not asyncio.current_task():
            self._woken = True
            holder.cancel()

    async def keepalive(self, idle: float) -> None:
        if not self.ended.is_set() and time.monotonic() - self.last_write >= idle:
            await self.write(KEEPALIVE)
