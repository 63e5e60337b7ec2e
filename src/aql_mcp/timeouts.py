"""Deadlines checked by one timer per event loop instead of one timer each.

Every call runs under deadlines: the pace of its request body (middleware/limits.py), its tool's
time limit (protocol/tools.py), and its connection's (server/deadline.py), all measured in seconds.
`asyncio.timeout` or `call_later` arms a timer on the loop for each and disarms it when the work
ends, which on uvloop allocates and frees a libuv timer every time: several per call, a few
microseconds each, for deadlines that almost never pass (bench/PROFILE.md). Here a deadline goes
into the bucket of `TICK_SECONDS` its time falls in (`Wheel`), and one timer per loop runs out the
buckets whose time has come: arming and disarming is a dictionary step, and a deadline fires up to
`TICK_SECONDS` late, which is nothing next to limits of seconds.

`deadline_at` behaves like `asyncio.timeout_at`: the task is cancelled when the deadline passes, and
the cancellation comes out as `TimeoutError`.
"""

from __future__ import annotations

import asyncio
import heapq
import math
import weakref
from types import TracebackType
from typing import Protocol

# The width of a bucket, and so how late a deadline may fire: short enough for the limits of tens of
# milliseconds tests set, and only a hundred turns of the loop a second while any deadline is armed.
TICK_SECONDS = 0.01
# How early the loop's timer may run (uvloop's clock has millisecond steps).
JITTER_SECONDS = 0.002


class Expiring(Protocol):
    """What a wheel holds: something to call when its bucket comes up."""

    def run_out(self) -> None: ...


class Wheel:
    """The armed deadlines of one event loop, by the bucket their time falls in."""

    __slots__ = ("_buckets", "_running", "_slots", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._buckets: dict[int, dict[Expiring, None]] = {}
        # The slots that have had a bucket, soonest first: a tick looks at the due ones only.
        self._slots: list[int] = []
        self._running = False

    def add(self, item: Expiring, seconds: float) -> int:
        """Run `item` out in `seconds` (up to TICK_SECONDS later); the slot `remove` takes."""
        slot = math.ceil((self.loop.time() + seconds) / TICK_SECONDS)
        bucket = self._buckets.get(slot)
        if bucket is None:
            bucket = self._buckets[slot] = {}
            heapq.heappush(self._slots, slot)
        bucket[item] = None
        if not self._running:
            self._running = True
            self._next_tick()
        return slot

    def _next_tick(self) -> None:
        # On the buckets' boundaries: a deadline runs out less than one bucket after its time.
        self.loop.call_at((math.floor(self.loop.time() / TICK_SECONDS) + 1) * TICK_SECONDS, self._tick)

    def remove(self, item: Expiring, slot: int) -> None:
        bucket = self._buckets.get(slot)
        if bucket is not None:
            # An emptied bucket stays until its slot comes up: its slot is in the heap once.
            bucket.pop(item, None)

    def _tick(self) -> None:
        # A timer may run a little early: a bucket whose end is that close counts as come.
        now = math.floor((self.loop.time() + JITTER_SECONDS) / TICK_SECONDS)
        try:
            while self._slots and self._slots[0] <= now:
                for item in self._buckets.pop(heapq.heappop(self._slots), {}):
                    item.run_out()
        finally:
            # Re-armed whatever a callback did: the other deadlines still run out.
            if self._slots:
                self._next_tick()
            else:
                self._running = False


_wheels: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Wheel] = weakref.WeakKeyDictionary()
# The last loop's wheel, found without a weak reference per lookup (a process serves on one loop).
_last: list[Wheel] = []


def wheel_of(loop: asyncio.AbstractEventLoop) -> Wheel:
    if _last and _last[0].loop is loop:
        return _last[0]
    wheel = _wheels.get(loop)
    if wheel is None:
        wheel = _wheels[loop] = Wheel(loop)
    _last[:] = [wheel]
    return wheel


class Deadline:
    """`async with deadline_at(when)`: see the module docstring. `when` None never expires."""

    __slots__ = ("_cancelling", "_expired", "_slot", "_task", "_wheel", "when")

    def __init__(self, when: float | None) -> None:
        self.when = when
        self._task: asyncio.Task[object] | None = None
        self._wheel: Wheel | None = None
        self._slot = 0
        self._cancelling = 0
        self._expired = False

    async def __aenter__(self) -> Deadline:
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("deadline_at must be used inside a task")
        self._task = task
        self._cancelling = task.cancelling()
        if self.when is not None:
            self._wheel = wheel_of(task.get_loop())
            self._slot = self._wheel.add(self, self.when - self._wheel.loop.time())
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> bool | None:
        if self._wheel is not None:
            self._wheel.remove(self, self._slot)
            self._wheel = None
        # Ours alone (as asyncio.timeout decides): the cancellation becomes a TimeoutError.
        if (
            self._expired
            and self._task is not None
            and self._task.uncancel() <= self._cancelling
            and exc_type is asyncio.CancelledError
        ):
            raise TimeoutError from exc
        return None

    def run_out(self) -> None:
        """The wheel's call: the deadline passed while the work still ran."""
        self._wheel = None
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
