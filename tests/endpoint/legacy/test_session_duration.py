"""`mcp.server.session.duration` across replicas: a session is measured once, by whichever replica
ends it, whether or not that replica holds a copy (docs/monitoring.md, "MCP metrics")."""

from __future__ import annotations

import pytest

from aql_mcp.endpoint.legacy.session import Session
from aql_mcp.endpoint.legacy.sessions import SessionManager
from aql_mcp.store.base import SessionRecord, Store
from tests.support.clock import Clock
from tests.support.engines import Backend

pytestmark = pytest.mark.anyio

IDLE = 100
START = 1_000_000.0


class Durations:
    """What one replica's `on_duration` was told: (session id, protocol version, seconds)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, float]] = []

    def __call__(self, record: SessionRecord, seconds: float) -> None:
        self.seen.append((record.id, record.protocol_version, seconds))


def replica(store: Store, clock: Clock, durations: Durations) -> SessionManager:
    return SessionManager(store, idle_seconds=IDLE, max_open=10, retry_after=30, clock=clock, on_duration=durations)


async def create(manager: SessionManager, version: str = "2025-11-25") -> Session:
    return await manager.create(
        owner="owner-a", protocol_version=version, client_info={}, capabilities={}, log_level="info"
    )


async def test_a_session_expired_by_a_replica_without_a_copy_is_measured_there_once(backend: Backend) -> None:
    clock = Clock(START)
    held, holding = Durations(), Durations()
    first, second = replica(await backend.open(), clock, held), replica(await backend.open(), clock, holding)
    session = await create(first, "2025-06-18")
    clock.advance(IDLE + 7)
    assert await second.sweep() == 1
    assert holding.seen == [(session.id, "2025-06-18", IDLE + 7)]
    # The replica holding the copy hears of the end (or sweeps) and measures nothing more.
    assert await first.sweep() == 0
    assert held.seen == []


async def test_two_replicas_sweeping_the_same_sessions_measure_each_once(backend: Backend) -> None:
    clock = Clock(START)
    one, other = Durations(), Durations()
    first, second = replica(await backend.open(), clock, one), replica(await backend.open(), clock, other)
    created = [await create(first), await create(second), await create(first)]
    clock.advance(IDLE + 1)
    assert await first.sweep() + await second.sweep() == 3
    measured = sorted(seen[0] for seen in one.seen + other.seen)
    assert measured == sorted(session.id for session in created)
    assert {seen[2] for seen in one.seen + other.seen} == {IDLE + 1}
