"""Execution leases on every engine (plugins/executions/store.py, docs/executions.md "Leases and
takeover"): one statement renews a replica's leases; a live execution whose lease ran out is
claimed by one other replica (new attempt, fresh lease) and resumed, so the dead worker's late
writes change nothing; past `max_takeovers` it fails, a pending one is cancelled; on PostgreSQL the
database's clock decides, whatever the replicas' clocks say."""

from __future__ import annotations

import time

import pytest

from aql_mcp.builtin_sections import ExecutionSettings
from aql_mcp.operations.payload import Limits
from aql_mcp.plugins.executions.store import Batch, ExecutionRecord, Takeover
from aql_mcp.plugins.executions.worker import ExecutionWorker
from aql_mcp.plugins.records.store import NewRecord, Quota
from aql_mcp.store.base import Store
from tests.support.engines import Backend
from tests.support.wait import arrives, eventually

pytestmark = pytest.mark.anyio
QUOTA = Quota(100_000, 100_000_000)
LIMITS = Limits(1_000_000, 10_000, 32)
# Minutes off, either way: far more than any lease.
SKEW = 600.0
# A lease short enough to run out within a test on the database's clock.
SHORT = 0.3


def _record(execution_id: str, now: float) -> ExecutionRecord:
    return ExecutionRecord(execution_id, "alice", "import", "pending", now, now, params={"collection": "c"})


async def _running(store: Store, execution_id: str, payload: bytes = b"p", now: float | None = None) -> ExecutionRecord:
    now = time.time() if now is None else now
    assert await store.executions.create(_record(execution_id, now), payload, max_live_per_owner=9)
    started = await store.executions.start(execution_id, now)
    assert started is not None
    return started


def _batch(start: int, count: int) -> Batch:
    return Batch(
        tenant="alice",
        collection="c",
        records=[NewRecord("c", f"rec_{start + i:020x}", {"n": start + i}, "e", "now") for i in range(count)],
        rejected=[],
        done=start + count,
        total=30,
        quota=QUOTA,
        report_cap=3,
    )


async def _taken(store: Store, *, max_takeovers: int = 3) -> Takeover:
    """The first takeover that finds something (a short lease runs out on the database's clock)."""
    found: list[Takeover] = []

    async def took() -> bool:
        taken = await store.executions.take_over(time.time() + 60, lease_seconds=30, max_takeovers=max_takeovers)
        if taken.resumed or taken.ended:
            found.append(taken)
        return bool(found)

    await arrives(took, "no lease ran out")
    return found[0]


async def test_an_expired_lease_is_claimed_once_and_fences_the_old_worker_out(backend: Backend) -> None:
    first, second = await backend.open(), await backend.open()
    await first.records.create_collection("alice", "c", "", None, "now")
    started = await _running(first, "run")
    assert await first.executions.import_batch("run", _batch(0, 10), time.time(), attempt=started.attempts) == "written"
    # Not leased yet (started, not renewed): never taken over, whatever the clock.
    assert await second.executions.take_over(time.time() + 10_000, lease_seconds=30, max_takeovers=3) == Takeover()
    assert await first.executions.renew(SHORT, time.time()) == 1
    taken = await _taken(second)
    assert [record.id for record in taken.resumed] == ["run"]
    claimed = taken.resumed[0]
    assert (claimed.status, claimed.replica, claimed.attempts) == ("running", second.executions.replica, 2)
    assert claimed.progress.current == 10  # resumed after its last written batch
    # The dead worker's late writes change nothing; the new attempt's do.
    assert await first.executions.import_batch("run", _batch(10, 10), time.time(), attempt=1) == "stopped"
    assert not await first.executions.transition("run", "completed", time.time(), attempt=1)
    assert await second.executions.import_batch("run", _batch(10, 10), time.time(), attempt=2) == "written"
    # Its fresh lease is the new replica's: nobody takes it again while that one renews it.
    assert await second.executions.renew(30, time.time()) == 1
    assert await first.executions.take_over(time.time() + 1, lease_seconds=30, max_takeovers=3) == Takeover()
    assert (await first.records.usage("alice"))[0] == 20


async def test_past_max_takeovers_a_running_execution_fails_and_a_pending_one_is_cancelled(backend: Backend) -> None:
    first, second = await backend.open(), await backend.open()
    await _running(first, "run")
    assert await first.executions.create(_record("wait", time.time()), b"p", max_live_per_owner=9)
    assert await first.executions.renew(SHORT, time.time()) == 2  # pending rows are leased too
    taken = await _taken(second, max_takeovers=0)
    assert taken.resumed == []
    assert sorted(taken.ended) == ["run", "wait"]
    run, wait = await second.executions.load("run"), await second.executions.load("wait")
    assert run is not None
    assert wait is not None
    assert run.status == "failed"
    assert run.error is not None
    assert run.error["details"]["reason"] == "replica_stopped"
    assert wait.status == "cancelled"
    assert await second.executions.payload("run") == b"p"  # a retry resumes it


async def test_on_postgres_skewed_replica_clocks_neither_expire_a_live_lease_nor_keep_a_dead_one(
    backend: Backend,
) -> None:
    if backend.engine != "postgres":
        pytest.skip("one SQLite process has one clock")
    ahead, behind = await backend.open(), await backend.open()
    await _running(ahead, "ahead", now=time.time() + SKEW)
    await _running(behind, "behind", now=time.time() - SKEW)
    assert await ahead.executions.renew(30, time.time() + SKEW) == 1
    assert await behind.executions.renew(30, time.time() - SKEW) == 1
    assert await behind.executions.take_over(time.time() - SKEW, lease_seconds=30, max_takeovers=3) == Takeover()
    assert await ahead.executions.take_over(time.time() + SKEW, lease_seconds=30, max_takeovers=3) == Takeover()
    # The heartbeat-judged recovery leaves leased rows to the takeover, even of a replica that stopped.
    await ahead.bus.heartbeat(time.time() + SKEW)
    assert await behind.executions.recover(time.time() - SKEW, 15.0) == []


async def test_a_worker_resumes_an_import_a_lost_replica_left_and_writes_every_row_once(backend: Backend) -> None:
    """The first replica wrote a batch, renewed its lease and died; another replica's worker takes
    the import over at its next renewal and completes it: every row exactly once. (On SQLite the
    next start of the one process fails what the earlier one left at once: `recover`.)"""
    if backend.engine != "postgres":
        pytest.skip("a SQLite store has one process: its restart recovers, no other replica takes over")
    first, second = await backend.open(), await backend.open()
    await first.records.create_collection("alice", "c", "", None, "now")
    payload = b"".join(b'{"n": %d}\n' % i for i in range(30))
    started = await _running(first, "imp", payload)
    assert await first.executions.import_batch("imp", _batch(0, 10), time.time(), attempt=started.attempts) == "written"
    assert await first.executions.renew(SHORT, time.time()) == 1
    worker = ExecutionWorker(
        second.executions,  # type: ignore[arg-type]
        second.records,  # type: ignore[arg-type]
        ExecutionSettings(batch_size=7),
        lambda: QUOTA,
        LIMITS,
        lease_seconds=SHORT * 3,
    )
    outcomes: list[str] = []
    worker.on_takeover.append(outcomes.append)
    await worker.start()
    try:
        await eventually(lambda: outcomes == ["resumed"], "the import was not taken over")
        await eventually(lambda: worker.running == 0, "the resumed import did not end")
    finally:
        await worker.stop()
    done = await second.executions.load("imp")
    assert done is not None
    assert (done.status, done.attempts, done.replica) == ("completed", 2, second.executions.replica)
    assert done.result == {"imported": 30, "rejected": 0, "rows": 30}
    assert (await second.records.usage("alice"))[0] == 30
