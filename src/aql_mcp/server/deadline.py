"""One running deadline of a connection: the phase it times (`idle`, `head`, `drain`, `linger`,
`stall`) and its timer on the event loop. `LimitedHttpProtocol` (connection.py) keeps one for the
connection's state and one for a client that stopped reading (docs/connections.md)."""

from __future__ import annotations

import asyncio
from asyncio import TimerHandle
from collections.abc import Callable


class Deadline:
    """At most one timer at a time; arming another phase replaces the running one."""

    __slots__ = ("_loop", "_timer", "phase")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._timer: TimerHandle | None = None
        self.phase = ""

    def arm(self, phase: str, seconds: float, callback: Callable[[], None], *, keep: bool = False) -> None:
        """Call `callback` in `seconds`; with `keep`, a deadline of the same phase already running
        keeps its time (trickled bytes never extend it)."""
        if keep and self.phase == phase:
            return
        self.disarm()
        self.phase = phase
        self._timer = self._loop.call_later(seconds, callback)

    def disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = None
        self.phase = ""

    def fired(self) -> None:
        """The timer ran: nothing to cancel any more; the phase stays until the state changes."""
        self._timer = None
