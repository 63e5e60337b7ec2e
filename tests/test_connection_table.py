"""The connection table: which connection the cap evicts, and when none may go."""

from __future__ import annotations

from aql_mcp.connection_table import ConnectionTable, Standing
from tests.support.clock import Clock


def test_the_table_offers_the_connection_longest_without_a_request_and_never_one_in_flight() -> None:
    table = ConnectionTable[object]()
    first, second, third = (object() for _ in range(3))
    for protocol in (first, second, third):
        table.add(protocol)
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
    for protocol in (trusted, served, new):
        table.add(protocol)
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


def test_a_connection_quiet_for_less_than_the_minimum_age_is_never_evicted_nor_one_of_higher_standing() -> None:
    clock = Clock(100.0)
    table = ConnectionTable[object](clock)
    old_trusted, young = (object() for _ in range(2))
    table.add(old_trusted)
    table.mark(old_trusted, in_flight=False, standing=Standing.TRUSTED)
    clock.now += 60
    table.add(young)
    clock.now += 0.5
    assert table.evictable(1.0) is None  # a flood of new connections does not reach the trusted one
    clock.now += 0.5
    assert table.evictable(1.0) is young
