"""Task leases on every engine (store/tasks.py, docs/eras.md "Tasks"): one poll renews the leases of
a replica's tasks and reads what changed; a live task whose lease ran out is failed by any replica;
on PostgreSQL the database's clock decides, so replicas with skewed clocks neither lose a lease
nor take one early."""

from __future__ import annotations

import time

import pytest

from aql_mcp.endpoint.modern.task_poll import REPLICA_LOST, replica_lost_error
from aql_mcp.store.base import Store
from aql_mcp.store.tasks import TaskRecord
from tests.support.engines import Backend
from tests.support.wait import arrives

pytestmark = pytest.mark.anyio
NOW = 1_000_000.0
ASK = {"method": "elicitation/create", "params": {"mode": "form", "message": "ok?", "requestedSchema": {}}}
# Minutes off, either way: far more than any lease.
SKEW = 600.0


def _task(task_id: str, now: float = NOW) -> TaskRecord:
    return TaskRecord(
        id=task_id,
        owner="alice",
        tool="slow_compute",
        status="working",
        created_at=now,
        updated_at=now,
        expires_at=now + 3600,
        ttl_ms=3_600_000,
        poll_ms=1000,
    )


async def _create(store: Store, task_id: str, *, lease: float | None, now: float = NOW) -> None:
    created = await store.tasks.create_task(
        _task(task_id, now), max_live_per_owner=10, max_stored_per_owner=100, now=now, lease_seconds=lease
    )
    assert created


async def test_one_poll_reads_every_tasks_status_and_the_answers_of_those_asked_for(store: Store) -> None:
    tasks = store.tasks
    for task_id in ("run", "ask", "stop"):
        await _create(store, task_id, lease=60)
    assert await tasks.park_task("ask", {"q1": ASK, "q2": ASK}, NOW)
    assert await tasks.answer_task("ask", "alice", {"q1": {"action": "accept"}}, NOW) == "stored"
    assert await tasks.cancel_task("stop", "alice", NOW)
    states = await tasks.poll_tasks(["run", "ask", "stop", "gone"], answers_for=["ask"], lease_seconds=60, now=NOW)
    assert set(states) == {"run", "ask", "stop"}  # a task that no longer exists is missing
    assert (states["run"].status, states["run"].answers) == ("working", None)
    assert (states["stop"].status, states["stop"].answers) == ("cancelled", None)
    assert states["ask"].status == "input_required"
    assert states["ask"].answers == {"q1": {"action": "accept"}}
    assert await tasks.poll_tasks([], answers_for=[], lease_seconds=60, now=NOW) == {}


async def test_a_task_without_a_lease_is_never_taken_over(store: Store) -> None:
    await _create(store, "old", lease=None)
    assert await store.tasks.take_over_tasks(replica_lost_error(), REPLICA_LOST, NOW + 10_000) == []
    found = await store.tasks.load_task("old")
    assert found is not None
    assert found.status == "working"


async def test_on_sqlite_the_lease_runs_on_the_process_clock_and_a_renewal_extends_it(backend: Backend) -> None:
    if backend.engine != "sqlite":
        pytest.skip("PostgreSQL leases run on the database's clock (below)")
    store = await backend.open()
    await _create(store, "t", lease=10)
    await _create(store, "done", lease=10)
    assert await store.tasks.finish_task("done", "completed", NOW, result={"content": []})
    assert await store.tasks.take_over_tasks(replica_lost_error(), REPLICA_LOST, NOW + 9) == []
    await store.tasks.poll_tasks(["t"], answers_for=[], lease_seconds=10, now=NOW + 8)  # now ends at NOW + 18
    assert await store.tasks.take_over_tasks(replica_lost_error(), REPLICA_LOST, NOW + 17) == []
    # A later run of the service (another replica name) does not renew what the first one leased.
    later = await backend.open()
    await later.tasks.poll_tasks(["t"], answers_for=[], lease_seconds=100, now=NOW + 17)
    assert await later.tasks.take_over_tasks(replica_lost_error(), REPLICA_LOST, NOW + 19) == [("t", "alice")]
    await _assert_lost(later, "t")
    done = await later.tasks.load_task("done")
    assert done is not None
    assert done.status == "completed"  # an ended task is nobody's to take


async def test_on_postgres_a_lease_ends_on_the_database_clock_whatever_the_replicas_clocks_say(
    backend: Backend,
) -> None:
    if backend.engine != "postgres":
        pytest.skip("one SQLite process has one clock")
    ahead, behind = await backend.open(), await backend.open()
    # A replica minutes ahead creates and renews a long lease: the one behind does not take it...
    await _create(ahead, "long", lease=30, now=time.time() + SKEW)
    await ahead.tasks.poll_tasks(["long"], answers_for=[], lease_seconds=30, now=time.time() + SKEW)
    assert await behind.tasks.take_over_tasks(replica_lost_error(), REPLICA_LOST, time.time() - SKEW) == []
    # ... and one minutes behind keeps its own lease against a replica ahead.
    await _create(behind, "kept", lease=30, now=time.time() - SKEW)
    assert await ahead.tasks.take_over_tasks(replica_lost_error(), REPLICA_LOST, time.time() + SKEW) == []
    # A short lease that nobody renews ends (another replica's poll does not renew it): taken over.
    await _create(ahead, "short", lease=0.5, now=time.time() + SKEW)
    taken: list[tuple[str, str]] = []

    async def taken_over() -> bool:
        await behind.tasks.poll_tasks(["short"], answers_for=[], lease_seconds=30, now=time.time() - SKEW)
        taken.extend(await behind.tasks.take_over_tasks(replica_lost_error(), REPLICA_LOST, time.time() - SKEW))
        return bool(taken)

    await arrives(taken_over, "the unrenewed lease did not end")
    assert taken == [("short", "alice")]
    await _assert_lost(behind, "short")
    for live in ("long", "kept"):
        found = await behind.tasks.load_task(live)
        assert found is not None
        assert found.status == "working"


async def test_on_postgres_heartbeats_use_the_database_clock(backend: Backend) -> None:
    """A replica whose clock is minutes behind is not counted gone by one whose clock is ahead."""
    if backend.engine != "postgres":
        pytest.skip("one SQLite replica")
    ahead, behind = await backend.open(), await backend.open()
    assert await behind.bus.heartbeat(time.time() - SKEW) >= 1
    assert await ahead.bus.heartbeat(time.time() + SKEW) == 2
    assert await behind.bus.heartbeat(time.time() - SKEW) == 2


async def _assert_lost(store: Store, task_id: str) -> None:
    found = await store.tasks.load_task(task_id)
    assert found is not None
    assert (found.status, found.status_message) == ("failed", REPLICA_LOST)
    assert found.error is not None
    assert found.error["code"] == -32006
    assert found.error["data"]["retryAfter"] == 1
    assert found.input_requests == {}
