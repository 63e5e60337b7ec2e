"""An event for the objects every open stream and connection holds: `asyncio.Event`'s `set`,
`clear`, `is_set` and `wait`, without its cost while nothing waits.

`asyncio.Event` (and `anyio.Event`, which wraps one) allocates a waiter deque when it is made,
about 0.7 KiB, whether or not anything ever waits; an open stream held five of them (bench/README.md,
"Stream rows"). Most of these are only read, or waited for by one task at a time, so a `Flag` makes
its waiter list when the first waiter comes.
"""

from __future__ import annotations

import asyncio


class Flag:
    """An event: `wait` returns once `set` was called and not `clear`ed since."""

    __slots__ = ("_set", "_waiters")

    def __init__(self, value: bool = False) -> None:
        self._set = value
        self._waiters: list[asyncio.Future[None]] | None = None

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        if self._set:
            return
        self._set = True
        for waiter in self._waiters or ():
            if not waiter.done():
                waiter.set_result(None)

    def clear(self) -> None:
        self._set = False

    async def wait(self) -> bool:
        if self._set:
            return True
        # One future per waiter, as asyncio.Event does: a cancelled waiter cancels only its own.
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self._waiters is None:
            self._waiters = []
        self._waiters.append(waiter)
        try:
            await waiter
            return True
        finally:
            self._waiters.remove(waiter)
