"""The open connections of one listening port, grouped so that the connection to evict at the cap
is found at once (docs/connections.md, "The connection cap")."""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from enum import IntEnum
from typing import Any, Generic, TypeVar

T = TypeVar("T", bound=Hashable)
# `loop.call_soon`: runs a callback on the next turn of the event loop.
CallSoon = Callable[..., Any]


class Standing(IntEnum):
    """What a connection has shown; eviction takes the lowest standing first (docs/connections.md)."""

    NEW = 0  # nothing sent yet, or only part of a first head
    SERVED = 1  # at least one request answered, none with a valid token
    TRUSTED = 2  # at least one request answered with a valid token


class ConnectionTable(Generic[T]):
    """The open connections of one port: those with a request in flight kept apart, the others by
    standing, each group oldest first, so the connection to evict is found at once at the cap. A
    connection moves to the end of its group each time a request starts or ends: "oldest" is the
    longest without news. Connections are also counted by source address, for a per-source cap."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._waiting: tuple[dict[T, float], ...] = tuple({} for _ in Standing)
        self._serving: dict[T, None] = {}
        self._standing: dict[T, Standing] = {}
        # New connections the event loop has not yet read from, by admission number (see `ripen_later`).
        self._fresh: dict[T, int] = {}
        self._admitted = 0
        self._ripening = False
        self._sources: dict[T, str] = {}
        self._per_source: dict[str, int] = {}
        self.lingering = 0  # refused connections still reading what the client sends (not counted above)

    def __len__(self) -> int:
        return len(self._standing)

    def add(self, protocol: T, source: str | None = None) -> None:
        self._standing[protocol] = Standing.NEW
        self._waiting[Standing.NEW][protocol] = self._clock()
        self._admitted += 1
        self._fresh[protocol] = self._admitted
        if source is not None:
            self._sources[protocol] = source
            self._per_source[source] = self._per_source.get(source, 0) + 1

    def held_by(self, source: str) -> int:
        """How many open connections come from `source`."""
        return self._per_source.get(source, 0)

    def mark(self, protocol: T, *, in_flight: bool, standing: Standing | None = None) -> None:
        """Move an open connection to the end of the group its state calls for; a closed one stays
        out. Standing only rises."""
        current = self._standing.get(protocol)
        if current is None:
            return
        self._unlist(protocol, current)
        risen = current if standing is None else max(current, standing)
        self._standing[protocol] = risen
        if in_flight:
            self._serving[protocol] = None
        else:
            self._waiting[risen][protocol] = self._clock()

    def remove(self, protocol: T) -> None:
        standing = self._standing.pop(protocol, None)
        if standing is None:
            return
        self._unlist(protocol, standing)
        source = self._sources.pop(protocol, None)
        if source is not None:
            held = self._per_source[source] - 1
            if held:
                self._per_source[source] = held
            else:
                del self._per_source[source]

    def _unlist(self, protocol: T, standing: Standing) -> None:
        self._waiting[standing].pop(protocol, None)
        self._serving.pop(protocol, None)
        self._fresh.pop(protocol, None)

    def oldest_waiting(self) -> T | None:
        """The oldest connection with no request in flight, in the lowest standing that has one."""
        oldest = self._oldest()
        return None if oldest is None else oldest[0]

    def evictable(self, min_age: float) -> T | None:
        """`oldest_waiting`: a connection that never completed a request whatever its age, once the
        loop has read from it (`ripen_later`); a served one only once it has been quiet for
        `min_age`. A higher standing is never taken while a lower one has a connection, so a flood
        of new connections churns its own and never a served one (issue 27, N3: with the floor on
        new connections too, a flood kept every slot young and every newcomer, a probe, got 503)."""
        oldest = self._oldest()
        if oldest is None:
            return None
        protocol, since = oldest
        if self._standing[protocol] is Standing.NEW:
            return None if protocol in self._fresh else protocol
        return None if self._clock() - since < min_age else protocol

    def ripen_later(self, call_soon: CallSoon) -> None:
        """Make the new connections admitted so far evictable two turns of the event loop from now.

        Connections accepted in one turn are all admitted before the loop reads from any of them; a
        burst larger than the cap would otherwise evict a client whose request head is already
        waiting in the socket, unread. Two turns: uvloop reads in the turn that admitted them,
        asyncio in the next (its reader is registered after `connection_made`)."""
        if self._ripening:
            return
        self._ripening = True

        def first_turn() -> None:
            call_soon(self._ripen, self._admitted, call_soon)

        call_soon(first_turn)

    def _ripen(self, upto: int, call_soon: CallSoon) -> None:
        self._ripening = False
        while self._fresh:
            protocol, number = next(iter(self._fresh.items()))
            if number > upto:
                self.ripen_later(call_soon)  # admitted since the first turn: their own two turns
                return
            del self._fresh[protocol]

    def _oldest(self) -> tuple[T, float] | None:
        for group in self._waiting:
            if group:
                return next(iter(group.items()))
        return None
