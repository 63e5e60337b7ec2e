"""The connection table: which connection the cap evicts, and when none may go."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aql_mcp.server.connection_table import ConnectionTable, Standing
from tests.support.clock import Clock


class Turns:
    """The event loop's `call_soon`, turned by hand: callbacks queued now run at the next `turn()`."""

    def __init__(self) -> None:
        self._ready: list[tuple[Callable[..., Any], tuple[Any, ...]]] = []

    def call_soon(self, callback: Callable[..., Any], *args: Any) -> None:
        self._ready.append((callback, args))

    def turn(self, times: int = 1) -> None:
        for _ in range(times):
            ready, self._ready = self._ready, []
            for callback, args in ready:
                callback(*args)


def admit(table: ConnectionTable[object], *protocols: object) -> None:
    """Add connections as the protocol does, and let the loop read from them (two turns)."""
    turns = Turns()
    for protocol in protocols:
        table.add(protocol)
        table.ripen_later(turns.call_soon)
    turns.turn(2)


def test_the_table_offers_the_connection_longest_without_a_request_and_never_one_in_flight() -> None:
    table = ConnectionTable[object]()
    first, second, third = (object() for _ in range(3))
    admit(table, first, second, third)
    table.mark(first, in_flight=True)
    assert table.oldest_waiting() is second
    table.mark(first, in_flight=False)  # its request ended: now the newest without one
    table.remove(second)
    assert table.oldest_waiting() is third
    table.mark(second, in_flight=False)  # a closed connection does not come back
    assert len(table) == 2
    table.mark(third, in_flight=True)
    table.mark(first, in_flight=True)
    assert table.oldest_waiting() is None


def test_eviction_takes_new_connections_before_served_ones_and_served_before_trusted() -> None:
    clock = Clock(100.0)
    table = ConnectionTable[object](clock)
    trusted, served, new = (object() for _ in range(3))
    admit(table, trusted, served, new)
    table.mark(trusted, in_flight=False, standing=Standing.TRUSTED)
    table.mark(served, in_flight=False, standing=Standing.SERVED)
    clock.now += 5
    assert table.evictable(1.0) is new
    table.remove(new)
    assert table.evictable(1.0) is served
    table.mark(served, in_flight=True)
    assert table.evictable(1.0) is trusted
    table.mark(served, in_flight=False)  # standing is kept, never lowered
    table.mark(trusted, in_flight=False, standing=Standing.SERVED)
    assert table.evictable(0.0) is served


def test_a_served_connection_quiet_for_less_than_the_minimum_age_is_never_evicted_nor_one_of_higher_standing() -> None:
    clock = Clock(100.0)
    table = ConnectionTable[object](clock)
    old_trusted, young = (object() for _ in range(2))
    admit(table, old_trusted)
    table.mark(old_trusted, in_flight=False, standing=Standing.TRUSTED)
    clock.now += 60
    admit(table, young)
    table.mark(young, in_flight=False, standing=Standing.SERVED)
    clock.now += 0.5
    assert table.evictable(1.0) is None  # a client between two requests keeps its connection
    clock.now += 0.5
    assert table.evictable(1.0) is young


def test_a_never_served_connection_is_evicted_whatever_its_age_and_before_any_served_one() -> None:
    """Issue 27, N3: a flood of bare connects, each younger than the floor, evicts its own oldest
    instead of leaving every newcomer (a probe) a 503; served connections stay out of its reach."""
    clock = Clock(100.0)
    table = ConnectionTable[object](clock)
    served, first, second = (object() for _ in range(3))
    admit(table, served)
    table.mark(served, in_flight=False, standing=Standing.SERVED)
    clock.now += 60
    admit(table, first, second)
    assert table.evictable(1.0) is first
    table.remove(first)
    assert table.evictable(1.0) is second
    table.remove(second)
    assert table.evictable(1.0) is served


def test_a_new_connection_is_not_evicted_before_the_loop_has_gone_round_twice_since_it_was_admitted() -> None:
    """A burst larger than the cap, accepted in one turn, must not evict a client whose request
    head is waiting in its socket unread: until then a newcomer is refused, and a served connection
    is not taken in its place."""
    table, turns = ConnectionTable[object](Clock(100.0)), Turns()
    served, early, late = (object() for _ in range(3))
    admit(table, served)
    table.mark(served, in_flight=False, standing=Standing.SERVED)
    table.add(early)
    table.ripen_later(turns.call_soon)
    assert table.evictable(0.0) is None
    turns.turn()
    table.add(late)  # admitted after the first turn: it waits for two of its own
    table.ripen_later(turns.call_soon)
    assert table.evictable(0.0) is None
    turns.turn()
    assert table.evictable(0.0) is early
    table.remove(early)
    assert table.evictable(0.0) is None
    turns.turn(2)
    assert table.evictable(0.0) is late


def test_a_connection_read_from_before_it_ripens_leaves_the_new_ones() -> None:
    table, turns = ConnectionTable[object](Clock(100.0)), Turns()
    probe = object()
    table.add(probe)
    table.ripen_later(turns.call_soon)
    table.mark(probe, in_flight=True)  # its head was complete at the first read
    turns.turn(2)
    table.mark(probe, in_flight=False, standing=Standing.SERVED)
    assert table.evictable(0.0) is probe
    assert table.evictable(1.0) is None


def test_connections_are_counted_by_source_while_they_are_open() -> None:
    table = ConnectionTable[object]()
    first, second, other, unix = (object() for _ in range(4))
    table.add(first, "10.0.0.1")
    table.add(second, "10.0.0.1")
    table.add(other, "10.0.0.2")
    table.add(unix)  # no source address (a Unix socket): never counted
    table.mark(first, in_flight=True)
    assert (table.held_by("10.0.0.1"), table.held_by("10.0.0.2")) == (2, 1)
    table.remove(first)
    table.remove(first)  # twice: counted once
    table.remove(other)
    assert (table.held_by("10.0.0.1"), table.held_by("10.0.0.2")) == (1, 0)
    assert len(table) == 2
