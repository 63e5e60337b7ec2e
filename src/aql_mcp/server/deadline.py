"""One running deadline of a connection: the phase it times (`idle`, `head`, `drain`, `linger`,
`stall`) and when it runs out. `LimitedHttpProtocol` (connection.py) keeps one for the connection's
state and one for a client that stopped reading (docs/connections.md).

Every request arms and disarms them (the head's deadline, then the idle one), so they sit in the
loop's wheel of deadlines (aql_mcp/timeouts.py) rather than each taking a timer of the event loop:
a deadline fires up to `TICK_SECONDS` late, nothing next to timeouts of seconds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from aql_mcp.timeouts import wheel_of


class Deadline:
    """At most one deadline at a time; arming another phase replaces the running one."""

    __slots__ = ("_callback", "_slot", "_wheel", "phase")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._wheel = wheel_of(loop)
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
        """The wheel's call when the deadline's bucket comes up."""
        callback, self._slot = self._callback, None
        if callback is None:
            return
        # One connection's failing callback must not keep the others' deadlines from running out:
        # reported as the loop reports a failing timer's, and the wheel goes on.
        try:
            callback()
        except Exception as exc:
            self._wheel.loop.call_exception_handler({"message": "connection deadline failed", "exception": exc})
