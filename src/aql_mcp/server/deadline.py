"""One running deadline of a connection: the phase it times (`idle`, `head`, `drain`, `linger`,
`stall`) and when it runs out. `LimitedHttpProtocol` (connection.py) keeps one for the connection's
state and one for a client that stopped reading (docs/connections.md).

Every request arms and disarms them (the head's deadline, then the idle one), so they do not each
take a timer of the event loop: on uvloop a timer is a libuv handle made and freed each time, a few
microseconds twice per request (bench/PROFILE.md). The deadlines of a loop sit in buckets of
`TICK_SECONDS`, and one timer per loop runs out the buckets whose time has come: arming and
disarming is a dictionary step, and a deadline fires up to `TICK_SECONDS` late, nothing next to
timeouts of seconds.
"""

from __future__ import annotations

import asyncio
import math
import weakref
from collections.abc import Callable

# The width of a bucket, and so how late a deadline may fire.
TICK_SECONDS = 0.05


class _Wheel:
    """The armed deadlines of one event loop, by the bucket their time falls in."""

    __slots__ = ("_buckets", "_loop", "_running")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._buckets: dict[int, dict[Deadline, None]] = {}
        self._running = False

    def add(self, deadline: Deadline, seconds: float) -> int:
        slot = math.ceil((self._loop.time() + seconds) / TICK_SECONDS)
        bucket = self._buckets.get(slot)
        if bucket is None:
            bucket = self._buckets[slot] = {}
        bucket[deadline] = None
        if not self._running:
            self._running = True
            self._loop.call_later(TICK_SECONDS, self._tick)
        return slot

    def remove(self, deadline: Deadline, slot: int) -> None:
        bucket = self._buckets.get(slot)
        if bucket is not None:
            bucket.pop(deadline, None)
            if not bucket:
                del self._buckets[slot]

    def _tick(self) -> None:
        now = math.floor(self._loop.time() / TICK_SECONDS)
        try:
            for slot in sorted(slot for slot in self._buckets if slot <= now):
                for deadline in self._buckets.pop(slot, {}):
                    self._run_out(deadline)
        finally:
            if self._buckets:
                self._loop.call_later(TICK_SECONDS, self._tick)
            else:
                self._running = False

    def _run_out(self, deadline: Deadline) -> None:
        # One connection's failing callback must not keep the others' deadlines from running out:
        # reported as the loop reports a failing timer's, and the next one runs.
        try:
            deadline.run_out()
        except Exception as exc:
            self._loop.call_exception_handler({"message": "connection deadline failed", "exception": exc})


_wheels: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Wheel] = weakref.WeakKeyDictionary()


def _wheel_of(loop: asyncio.AbstractEventLoop) -> _Wheel:
    wheel = _wheels.get(loop)
    if wheel is None:
        wheel = _wheels[loop] = _Wheel(loop)
    return wheel


class Deadline:
    """At most one deadline at a time; arming another phase replaces the running one."""

    __slots__ = ("_callback", "_slot", "_wheel", "phase")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._wheel = _wheel_of(loop)
        self._slot: int | None = None
        self._callback: Callable[[], None] | None = None
        self.phase = ""

    def arm(self, phase: str, seconds: float, callback: Callable[[], None], *, keep: bool = False) -> None:
        """Call `callback` in `seconds`; with `keep`, a deadline of the same phase already running
        keeps its time (trickled bytes never extend it)."""
        if keep and self.phase == phase:
            return
        self.disarm()
        self.phase = phase
        self._callback = callback
        self._slot = self._wheel.add(self, seconds)

    def disarm(self) -> None:
        if self._slot is not None:
            self._wheel.remove(self, self._slot)
        self._slot = None
        self._callback = None
        self.phase = ""

    def fired(self) -> None:
        """The deadline ran out: nothing to cancel any more; the phase stays until the state changes."""
        self._slot = None

    def run_out(self) -> None:
        """Called by the loop's wheel when the deadline's bucket comes up."""
        callback, self._slot = self._callback, None
        if callback is not None:
            callback()
