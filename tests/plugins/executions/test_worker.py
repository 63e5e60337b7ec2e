"""The worker on every engine: it runs an import in atomic batches, stops at the batch after a
cancellation, and fails what it still runs when the replica stops (docs/executions.md)."""

from __future__ import annotations

import time
from typing import Any

import anyio
import orjson
import pytest

from aql_mcp.builtin_sections import ExecutionSettings
from aql_mcp.operations.payload import Limits
from aql_mcp.plugins.executions.store import ExecutionRecord, ExecutionStatus, Progress
from aql_mcp.plugins.executions.worker import QUEUED, ExecutionWorker
from aql_mcp.plugins.records.store import Quota
from aql_mcp.store.base import Store
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


class Gated:
    """The store's executions, with `store_part` held at `gate`, each `clear_output` and queued
    progress counted: an export that holds its slot, or one whose first write the store refused."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.gate = anyio.Event()
        self.cleared = 0
        self.retried = anyio.Event()
        self.queued = 0
        self.both_queued = anyio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def clear_output(self, execution_id: str, *, attempt: int) -> bool:
        self.cleared += 1
        if self.cleared > 1:
            self.retried.set()
        return bool(await self._inner.clear_output(execution_id, attempt=attempt))

    async def set_progress(self, execution_id: str, progress: Progress, now: float, *, attempt: int) -> bool:
        written = bool(await self._inner.set_progress(execution_id, progress, now, attempt=attempt))
        self.queued += progress.message == QUEUED
        if self.queued == 2:
            self.both_queued.set()
        return written

    async def store_part(self, execution_id: str, part: int, data: bytes, *, attempt: int) -> bool:
        await self.gate.wait()
        return bool(await self._inner.store_part(execution_id, part, data, attempt=attempt))


async def _export_created(store: Store, execution_id: str) -> ExecutionRecord:
    now = time.time()
    record = ExecutionRecord(execution_id, "alice", "export", "pending", now, now, params={"collection": "c"})
    assert await store.executions.create(record, None, max_live_per_owner=5)
    started = await store.executions.start(execution_id, now)
    assert started is not None
    return started


async def _export_started(store: Store, worker: ExecutionWorker, execution_id: str) -> None:
    worker.launch(await _export_created(store, execution_id))


async def _seed(store: Store, count: int) -> None:
    await store.records.create_collection("alice", "c", "", None, "now")
    worker = _worker(store, batch_size=50)
    await _started(
        store, worker, "import", b"".join(b'{"n": %d, "text": "%s"}\n' % (i, b"x" * 100) for i in range(count))
    )
    await eventually(lambda: worker.running == 0, "the import did not end")


async def test_an_export_is_written_in_parts_that_concatenate_to_every_record(store: Store) -> None:
    await _seed(store, 120)
    worker = ExecutionWorker(
        store.executions, store.records, ExecutionSettings(batch_size=25, export_part_bytes=1024),
        lambda: QUOTA, LIMITS, max_result_bytes=64 * 1024,
    )  # fmt: skip
    await _export_started(store, worker, "exp")
    await eventually(lambda: worker.running == 0, "the export did not end")
    done = await store.executions.load("exp")
    assert done is not None
    assert done.status == "completed"
    assert done.result is not None
    parts = [await store.executions.output_part("exp", "alice", n) for n in range(done.result["parts"])]
    assert done.result["parts"] > 10
    assert all(part is not None and len(part) <= 1024 for part in parts)
    ndjson = b"".join(part or b"" for part in parts)
    assert len(ndjson) == done.result["bytes"]
    assert sorted(orjson.loads(line)["n"] for line in ndjson.splitlines()) == list(range(120))


async def test_an_export_whose_writes_the_store_refuses_for_a_while_retries_and_completes(backend: Backend) -> None:
    store = await backend.open(lock_timeout_seconds=0.1)
    await _seed(store, 30)
    gated = Gated(store.executions)
    gated.gate.set()
    worker = ExecutionWorker(gated, store.records, ExecutionSettings(), lambda: QUOTA, LIMITS)  # type: ignore[arg-type]
    started = await _export_created(store, "exp")
    async with write_lock(backend, "executions"):
        worker.launch(started)
        with anyio.fail_after(10):
            await gated.retried.wait()  # the first try met the lock and the worker tried again
    await eventually(lambda: worker.running == 0, "the export did not end")
    assert await _status(store, "exp") == "completed"
    assert await store.executions.output_part("exp", "alice", 0) is not None


async def test_exports_past_the_replicas_cap_wait_queued_and_then_complete(store: Store) -> None:
    await _seed(store, 10)
    gated = Gated(store.executions)
    worker = ExecutionWorker(gated, store.records, ExecutionSettings(max_concurrent_exports=1), lambda: QUOTA, LIMITS)  # type: ignore[arg-type]
    for execution_id in ("first", "second", "third"):
        await _export_started(store, worker, execution_id)
    with anyio.fail_after(10):
        await gated.both_queued.wait()
    found = [await store.executions.load(name) for name in ("first", "second", "third")]
    assert [(r.status, r.progress.message) for r in found if r is not None].count(("running", QUEUED)) == 2
    assert gated.cleared == 1  # only the first export writes
    gated.gate.set()
    await eventually(lambda: worker.running == 0, "the exports did not end")
    assert [await _status(store, name) for name in ("first", "second", "third")] == ["completed"] * 3
