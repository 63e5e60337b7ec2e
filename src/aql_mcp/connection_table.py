"""The open connections of one listening port, grouped so that the connection to evict at the cap
is found at once (docs/connections.md, "The connection cap")."""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from enum import IntEnum
from typing import Generic, TypeVar

T = TypeVar("T", bound=Hashable)


class Standing(IntEnum):
    """What a connection has shown; eviction takes the lowest standing first (docs/connections.md)."""

    NEW = 0  # nothing sent yet, or only part of a first head
    SERVED = 1  # at least one request answered, none with a valid token
    TRUSTED = 2  # at least one request answered with a valid token


class ConnectionTable(Generic[T]):
    """The open connections of one port: those with a request in flight kept apart, the others by
    standing, each group oldest first, so the connection to evict is found at once at the cap. A
    connection moves to the end of its group each time a request starts or ends: "oldest" is the
    longest without news."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._waiting: tuple[dict[T, float], ...] = tuple({} for _ in Standing)
        self._serving: dict[T, None] = {}
        self._standing: dict[T, Standing] = {}
        self.lingering = 0  # refused connections still reading what the client sends (not counted above)

    def __len__(self) -> int:
        return len(self._standing)

    def add(self, protocol: T) -> None:
        self._standing[protocol] = Standing.NEW
        self._waiting[Standing.NEW][protocol] = self._clock()

    def mark(self, protocol: T, *, in_flight: bool, standing: Standing | None = None) -> None:
        """Move an open connection to the end of the group its state calls for; a closed one stays
        out. Standing only rises."""
        current = self._standing.get(protocol)
        if current is None:
            return
        self.remove(protocol)
        risen = current if standing is None else max(current, standing)
        self._standing[protocol] = risen
        if in_flight:
            self._serving[protocol] = None
        else:
            self._waiting[risen][protocol] = self._clock()

    def remove(self, protocol: T) -> None:
        standing = self._standing.pop(protocol, None)
        if standing is not None:
            self._waiting[standing].pop(protocol, None)
        self._serving.pop(protocol, None)

    def oldest_waiting(self) -> T | None:
        """The oldest connection with no request in flight, in the lowest standing that has one."""
        oldest = self._oldest()
        return None if oldest is None else oldest[0]

    def evictable(self, min_age: float) -> T | None:
        """`oldest_waiting` if it has been quiet for `min_age`; a higher standing is never taken
        while a lower one has a connection, so a flood of new connections only evicts its own."""
        oldest = self._oldest()
        if oldest is None or self._clock() - oldest[1] < min_age:
            return None
        return oldest[0]

    def _oldest(self) -> tuple[T, float] | None:
        for group in self._waiting:
            if group:
                return next(iter(group.items()))
        return None
