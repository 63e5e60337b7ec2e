"""Cancellation of a modern request by its client closing the connection (2026-07-28
basic/patterns/cancellation: on Streamable HTTP, closing the request is how a client cancels).

A plain asyncio watcher rather than a task group: it costs one task per request, where an anyio
task group with its cancel scopes cost several times that on every call (bench/README.md).
"""

from __future__ import annotations

import asyncio
from types import TracebackType

from starlette.types import Receive


class DisconnectWatch:
    """While entered, the client's disconnect cancels the current task; leaving swallows only the
    cancellation it caused (`disconnected` tells the caller there is no one left to answer)."""

    __slots__ = ("_done", "_receive", "_task", "_watcher", "disconnected")

    def __init__(self, receive: Receive) -> None:
        self._receive = receive
        self._done = False
        self._task: asyncio.Task[object] | None = None
        self._watcher: asyncio.Task[None] | None = None
        self.disconnected = False

    def __enter__(self) -> DisconnectWatch:
        self._task = asyncio.current_task()
        self._watcher = asyncio.get_running_loop().create_task(self._watch())
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> bool:
        # Set before the watcher is cancelled: from here on it can no longer cancel the request,
        # whose answer is about to be written.
        self._done = True
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
        if not self._done and self._task is not None:
            self.disconnected = True
            self._task.cancel()
