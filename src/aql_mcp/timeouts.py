"""Deadlines for the work of every call, checked by one timer per event loop instead of one each.

Every call runs under two deadlines: the pace of its request body (middleware/limits.py) and its
tool's time limit (protocol/tools.py), both measured in seconds. `asyncio.timeout` arms a timer on
the loop for each and disarms it when the work ends, which on uvloop allocates and frees a libuv
timer every time: two per call, a few microseconds each, for deadlines that almost never pass
(bench/PROFILE.md). `deadline_at` behaves like `asyncio.timeout_at` (the task is cancelled when
the deadline passes, and the cancellation comes out as `TimeoutError`), but entering and leaving
it only adds and removes the deadline from a set that one timer per loop looks at every
`TICK_SECONDS`: a deadline fires up to that much late, which is nothing next to limits of seconds.
"""

from __future__ import annotations

import asyncio
import weakref
from types import TracebackType

# How often the loop's timer looks at the deadlines, and so how late one may fire.
TICK_SECONDS = 0.05


class _Watch:
    """The deadlines of one event loop, and the timer that runs while there are any."""

    __slots__ = ("_running", "deadlines", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._running = False
        self.deadlines: dict[Deadline, None] = {}

    def add(self, deadline: Deadline) -> None:
        self.deadlines[deadline] = None
        if not self._running:
            self._running = True
            self.loop.call_later(TICK_SECONDS, self._tick)

    def _tick(self) -> None:
        now = self.loop.time()
        for deadline in [d for d in self.deadlines if d.when is not None and d.when <= now]:
            deadline.expire()
        if self.deadlines:
            self.loop.call_later(TICK_SECONDS, self._tick)
        else:
            self._running = False


_watches: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Watch] = weakref.WeakKeyDictionary()
# The last loop's watch, found without a weak reference per lookup (a process serves on one loop).
_last: list[_Watch] = []


def _watch_of(loop: asyncio.AbstractEventLoop) -> _Watch:
    if _last and _last[0].loop is loop:
        return _last[0]
    watch = _watches.get(loop)
    if watch is None:
        watch = _watches[loop] = _Watch(loop)
    _last[:] = [watch]
    return watch


class Deadline:
    """`async with deadline_at(when)`: see the module docstring. `when` None never expires."""

    __slots__ = ("_cancelling", "_expired", "_task", "_watch", "when")

    def __init__(self, when: float | None) -> None:
        self.when = when
        self._task: asyncio.Task[object] | None = None
        self._watch: _Watch | None = None
        self._cancelling = 0
        self._expired = False

    async def __aenter__(self) -> Deadline:
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("deadline_at must be used inside a task")
        self._task = task
        self._cancelling = task.cancelling()
        if self.when is not None:
            self._watch = _watch_of(asyncio.get_running_loop())
            self._watch.add(self)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> bool | None:
        if self._watch is not None:
            self._watch.deadlines.pop(self, None)
            self._watch = None
        # Ours alone (as asyncio.timeout decides): the cancellation becomes a TimeoutError.
        if (
            self._expired
            and self._task is not None
            and self._task.uncancel() <= self._cancelling
            and exc_type is asyncio.CancelledError
        ):
            raise TimeoutError from exc
        return None

    def expire(self) -> None:
        if self._watch is not None:
            self._watch.deadlines.pop(self, None)
            self._watch = None
        if self._task is not None and not self._task.done():
            self._expired = True
            self._task.cancel()

    @property
    def expired(self) -> bool:
        return self._expired


def deadline_at(when: float | None) -> Deadline:
    """Like `asyncio.timeout_at(when)` (loop time), checked every `TICK_SECONDS`."""
    return Deadline(when)


def deadline_after(seconds: float | None) -> Deadline:
    """Like `asyncio.timeout(seconds)`, checked every `TICK_SECONDS`."""
    return Deadline(None if seconds is None else asyncio.get_running_loop().time() + seconds)
