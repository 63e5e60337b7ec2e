"""Cancellation of a modern request by its client closing the connection (2026-07-28
basic/patterns/cancellation: on Streamable HTTP, closing the request is how a client cancels).

On this project's server the connection says when its client goes away (server/connection.py,
`watch_disconnect`), so a request costs a callback in a list. Served by another ASGI server (the
in-process test transport), a plain asyncio task watches `receive` for the disconnect instead: still
cheaper than an anyio task group with its cancel scopes, but a task per request (bench/PROFILE.md).
"""

from __future__ import annotations

import asyncio
from types import TracebackType

from starlette.types import Receive

from aql_mcp.scope import DisconnectSource


class DisconnectWatch:
    """While entered, the client's disconnect cancels the current task; leaving swallows only the
    cancellation it caused (`disconnected` tells the caller there is no one left to answer)."""

    __slots__ = ("_connection", "_done", "_receive", "_task", "_watcher", "disconnected")

    def __init__(self, receive: Receive, connection: DisconnectSource | None = None) -> None:
        self._receive = receive
        self._connection = connection
        self._done = False
        self._task: asyncio.Task[object] | None = None
        self._watcher: asyncio.Task[None] | None = None
        self.disconnected = False

    def __enter__(self) -> DisconnectWatch:
        self._task = asyncio.current_task()
        if self._connection is not None:
            self._connection.watch_disconnect(self._gone)
        else:
            self._watcher = asyncio.get_running_loop().create_task(self._watch())
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> bool:
        # Set before the watcher is cancelled: from here on it can no longer cancel the request,
        # whose answer is about to be written.
        self._done = True
        if self._connection is not None:
            self._connection.unwatch_disconnect(self._gone)
        if self._watcher is not None:
            self._watcher.cancel()
        if self.disconnected and exc_type is not None and issubclass(exc_type, asyncio.CancelledError):
            # Ours alone (no other cancellation pending, e.g. the server's shutdown): handled.
            return self._task is not None and self._task.uncancel() == 0
        return False

    async def _watch(self) -> None:
        # The body has been read, so the next message is the disconnect (or none at all).
        while (await self._receive())["type"] != "http.disconnect":
            pass
        self._gone()

    def _gone(self) -> None:
        if not self._done and self._task is not None:
            self.disconnected = True
            self._task.cancel()
