"""The worker on every engine: it runs an import in atomic batches, stops at the batch after a
cancellation, and fails what it still runs when the replica stops (docs/executions.md)."""

from __future__ import annotations

import time

import anyio
import pytest

from aql_mcp.executions.settings import ExecutionSettings
from aql_mcp.executions.worker import ExecutionWorker
from aql_mcp.operations.payload import Limits
from aql_mcp.store.base import Store
from aql_mcp.store.executions import ExecutionRecord, ExecutionStatus
from aql_mcp.store.records import Quota
from tests.support.engines import Backend, write_lock
from tests.support.wait import eventually

pytestmark = pytest.mark.anyio
QUOTA = Quota(100_000, 100_000_000)
LIMITS = Limits(1_000_000, 10_000, 32)


def _worker(store: Store, **settings: float) -> ExecutionWorker:
    return ExecutionWorker(store.executions, store.records, ExecutionSettings(**settings), lambda: QUOTA, LIMITS)  # type: ignore[arg-type]


async def _started(store: Store, worker: ExecutionWorker, kind: str, payload: bytes | None) -> str:
    now = time.time()
    record = ExecutionRecord("exec_1", "alice", kind, "pending", now, now, params={"collection": "c"})
    assert await store.executions.create(record, payload, max_live_per_owner=5)
    started = await store.executions.start("exec_1", now)
    assert started is not None
    worker.launch(started)
    return "exec_1"


async def _status(store: Store, execution_id: str) -> ExecutionStatus:
    found = await store.executions.load(execution_id)
    assert found is not None
    return found.status


async def test_an_import_completes_and_an_export_then_holds_every_record(store: Store) -> None:
    await store.records.create_collection("alice", "c", "", None, "now")
    worker = _worker(store, batch_size=7)
    payload = b"".join(b'{"n": %d}\n' % i for i in range(50))
    await _started(store, worker, "import", payload)
    await eventually(lambda: worker.running == 0, "the import did not end")
    done = await store.executions.load("exec_1")
    assert done is not None
    assert (done.status, done.progress.current, done.result) == (
        "completed",
        50,
        {"imported": 50, "rejected": 0, "rows": 50},
    )
    assert await store.executions.payload("exec_1") is None  # a completed import is never retried
    now = time.time()
    export = ExecutionRecord("exec_2", "alice", "export", "pending", now, now, params={"collection": "c"})
    assert await store.executions.create(export, None, max_live_per_owner=5)
    started = await store.executions.start("exec_2", now)
    assert started is not None
    worker.launch(started)
    await eventually(lambda: worker.running == 0, "the export did not end")
    output = await store.executions.output_part("exec_2", "alice", 0)
    assert output is not None
    assert len(output.splitlines()) == 50


async def test_a_cancellation_stops_the_import_at_a_batch_boundary(store: Store) -> None:
    await store.records.create_collection("alice", "c", "", None, "now")
    worker = _worker(store, batch_size=10, batch_pause_seconds=0.01)
    payload = b"".join(b'{"n": %d}\n' % i for i in range(100_000))
    await _started(store, worker, "import", payload)
    wake = worker.changed("exec_1")  # set after every batch
    with anyio.fail_after(20):
        while (found := await store.executions.load("exec_1")) is not None and found.progress.current < 50:
            wake.clear()
            await wake.wait()
    assert await store.executions.cancel("exec_1", "alice", time.time(), "stop") == "cancelled"
    await eventually(lambda: worker.running == 0, "the worker did not stop")
    done = await store.executions.load("exec_1")
    assert done is not None
    assert done.status == "cancelled"
    assert done.progress.current % 10 == 0
    assert (await store.records.usage("alice"))[0] == done.progress.current


async def test_stopping_the_worker_fails_what_it_runs_with_a_reason(store: Store) -> None:
    await store.records.create_collection("alice", "c", "", None, "now")
    worker = _worker(store, batch_size=10, batch_pause_seconds=0.05)
    await worker.start()
    await _started(store, worker, "import", b"".join(b'{"n": %d}\n' % i for i in range(10_000)))
    await worker.stop()
    done = await store.executions.load("exec_1")
    assert done is not None
    assert done.status == "failed"
    assert done.error is not None
    assert done.error["details"]["reason"] == "replica_shutdown"
    assert await store.executions.payload("exec_1") is not None  # kept for retry_execution
    assert await _status(store, "exec_1") == "failed"


async def test_an_execution_whose_worker_could_not_record_its_end_fails_at_the_next_sweep(backend: Backend) -> None:
    """A store error at the final transition (the table locked past the lock timeout, and past the
    worker's retries) must not leave the execution running forever on a live replica: the sweep
    fails it (worker_lost)."""
    store = await backend.open(lock_timeout_seconds=0.2)
    await store.records.create_collection("alice", "c", "", None, "now")
    worker = _worker(store, batch_size=10, store_retry_seconds=0)
    now = time.time()
    record = ExecutionRecord("exec_1", "alice", "import", "pending", now, now, params={"collection": "c"})
    assert await store.executions.create(record, b'{"n": 1}\n', max_live_per_owner=5)
    started = await store.executions.start("exec_1", now)
    assert started is not None
    async with write_lock(backend, "executions"):
        worker.launch(started)  # its batch and then its failure both meet the lock
        await eventually(lambda: worker.running == 0, "the worker did not end")
        assert await _status(store, "exec_1") == "running"
    await worker.start()  # sweeps at once
    await worker.stop()
    done = await store.executions.load("exec_1")
    assert done is not None
    assert done.status == "failed"
    assert done.error is not None
    assert done.error["details"]["reason"] == "worker_lost"
