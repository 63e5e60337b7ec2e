"""A one-way flag (set once, never cleared) for the objects every open stream holds.

`anyio.Event` and `asyncio.Event` each allocate a waiter deque when they are made, about 0.7 KiB,
whether or not anything ever waits; a stream held three of them (bench/README.md, "Stream rows").
Most of these flags are only ever read, so the event behind `wait` is made by its first waiter.
"""

from __future__ import annotations

import asyncio


class Flag:
    """`is_set`, `set` and `wait` of an event that is never cleared."""

    __slots__ = ("_event", "_set")

    def __init__(self) -> None:
        self._set = False
        self._event: asyncio.Event | None = None

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        self._set = True
        if self._event is not None:
            self._event.set()

    async def wait(self) -> None:
        if self._set:
            return
        if self._event is None:
            self._event = asyncio.Event()
        await self._event.wait()
