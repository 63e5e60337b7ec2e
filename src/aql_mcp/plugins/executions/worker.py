"""The worker: runs each execution as an asyncio task on the replica that accepted (or retried) it.

The row is the truth (plugins/executions/store.py). The worker never holds state another replica needs:
between two batches it learns of a cancellation from the batch's own transaction (`import_batch`
writes nothing once the row is not `running`) or, for an export, from `set_progress`. A
cancellation on any replica therefore stops the work at the next batch boundary, with no batch
half-written. `changed(id)` wakes followers on this replica (a call following its execution) after
every batch; followers elsewhere poll the row.

On start, and every `SWEEP_SECONDS`, the worker fails what dead replicas left running (`recover`),
fails what runs here under this replica's name with no worker left for it (`fail_abandoned`: a
worker whose final transition met a store error) and cancels what it created but could not start,
and deletes executions that ended longer ago than the retention. On stop it fails its own running
executions with a reason (a retry resumes them), so a restart never leaves one `running` forever.

Every write of a worker carries its lease (the attempt it runs, `ExecutionRecord.attempts`): once
another replica failed and retried the execution, the old worker's writes change nothing and it
stops at its next batch (plugins/executions/store.py).

Every `lease_seconds / RENEWALS_PER_LEASE` the worker renews the time lease of all this replica's
live executions with one statement, then takes over what other replicas stopped renewing (they
died): a running execution is claimed here and resumed as a retry would (an import after its last
written batch, an export from the start), up to `executions.max_takeovers` times.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import structlog

from aql_mcp.builtin_sections import ExecutionSettings
from aql_mcp.plugin import (
    INTERNAL_ERROR,
    NOT_FOUND_RESOURCE,
    RATE_LIMIT_QUOTA_EXHAUSTED,
    VALIDATION_INVALID_ENCODING,
    VALIDATION_PAYLOAD_TOO_LARGE,
    Limits,
    LimitSettings,
)
from aql_mcp.plugins.executions.backoff import retrying
from aql_mcp.plugins.executions.export import Exporter, ExportTooLarge
from aql_mcp.plugins.executions.rows import Format, PayloadError, Rows
from aql_mcp.plugins.executions.store import Batch, ExecutionRecord, ExecutionStore, Progress
from aql_mcp.plugins.records.operations import new_etag, new_id
from aql_mcp.plugins.records.store import Missing, NewRecord, Quota, QuotaExceeded, RecordStore, timestamp

T = TypeVar("T")
log = structlog.get_logger("aql_mcp.executions")
# The progress message of an export waiting for one of this replica's export slots.
QUEUED = "queued: waiting for an export slot on this replica (executions.max_concurrent_exports)"
# `limits.max_result_bytes`'s default, for a worker built without the service's settings (tests).
DEFAULT_MAX_RESULT_BYTES = LimitSettings().max_result_bytes
# How often the worker looks for executions left by replicas that died, and purges old ones.
SWEEP_SECONDS = 15.0
# A replica not heard from for this long is gone (the PostgreSQL bus's three missed heartbeats).
LIVE_SECONDS = 15.0
# A lease is renewed this many times within its length, so a failed renewal does not lose it.
RENEWALS_PER_LEASE = 3
SHUT_DOWN: dict[str, Any] = {
    "code": INTERNAL_ERROR,
    "message": "The replica running this execution shut down before it ended; retry_execution resumes it",
    "details": {"reason": "replica_shutdown"},
}


class ExecutionWorker:
    """Runs executions on this replica; `start`/`stop` belong to the service's lifespan."""

    def __init__(
        self,
        store: ExecutionStore,
        records: RecordStore,
        settings: ExecutionSettings,
        quota: Callable[[], Quota],
        limits: Limits,
        *,
        max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
        lease_seconds: float = 15.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self._records = records
        self._settings = settings
        self._quota = quota
        self._limits = limits
        self._clock = clock
        self._running: dict[str, asyncio.Task[None]] = {}
        self._leases: dict[str, int] = {}
        self._changed: dict[str, asyncio.Event] = {}
        self._starting = 0
        self._sweeper: asyncio.Task[None] | None = None
        self._leaser: asyncio.Task[None] | None = None
        self._renew_now = asyncio.Event()
        self.lease_seconds = lease_seconds
        # Hears of each execution this replica took over (`resumed`) or ended as its replica's (`ended`).
        self.on_takeover: list[Callable[[str], None]] = []
        self.stopping = False
        # Exports this replica writes at once (`max_concurrent_exports`); the others wait, running.
        self._exports = asyncio.Semaphore(settings.max_concurrent_exports)
        self._exporter = Exporter(
            store, records, settings, max_result_bytes=max_result_bytes, wake=self._wake, clock=clock
        )

    @property
    def running(self) -> int:
        return len(self._running)

    async def start(self) -> None:
        """Recover what dead replicas left, then keep doing so. A store that cannot write now (a
        read-only file, a lock held elsewhere) does not stop the service from starting: the next
        sweep tries again, and `/ready` reports the store meanwhile."""
        self.stopping = False
        try:
            await self._sweep()
        except Exception:
            log.warning("execution_sweep_failed")
        self._sweeper = asyncio.create_task(self._sweep_forever())
        self._leaser = asyncio.create_task(self._lease_forever())

    async def stop(self) -> None:
        self.stopping = True
        if self._sweeper is not None:
            self._sweeper.cancel()
            await asyncio.gather(self._sweeper, return_exceptions=True)
        if self._leaser is not None:
            # Not cancelled mid-statement: it ends after the write it is making, if any.
            self._renew_now.set()
            await asyncio.gather(self._leaser, return_exceptions=True)
        running, self._running = dict(self._running), {}
        leases, self._leases = dict(self._leases), {}
        for task in running.values():
            task.cancel()
        await asyncio.gather(*running.values(), return_exceptions=True)
        for execution_id in running:
            try:
                await self.store.transition(
                    execution_id, "failed", self._clock(), error=SHUT_DOWN, attempt=leases.get(execution_id)
                )
            except Exception:
                # Left running under this replica's name: the next start's recovery fails it.
                log.warning("execution_stop_failed", execution_id=execution_id)
            else:
                log.info("execution_stopped", execution_id=execution_id, reason="shutdown")

    def changed(self, execution_id: str) -> asyncio.Event:
        """Set after every batch of the execution, if it runs here: a follower's wake-up."""
        return self._changed.setdefault(execution_id, asyncio.Event())

    def forget(self, execution_id: str) -> None:
        if execution_id not in self._running:
            self._changed.pop(execution_id, None)

    @contextlib.contextmanager
    def starting(self) -> Iterator[None]:
        """Around a creation and start, or a retry, whose row may be `pending` or `running` here
        before `launch` registers it: the sweep leaves this replica's rows alone meanwhile."""
        self._starting += 1
        try:
            yield
        finally:
            self._starting -= 1

    def launch(self, record: ExecutionRecord) -> None:
        """Run the execution (already `running` on this replica, `record` as the start or retry
        left it: its `attempts` is the lease of every write) in the background."""
        task = asyncio.create_task(self._run(record), name=f"execution-{record.id}")
        self._running[record.id] = task
        self._leases[record.id] = record.attempts
        self._renew_now.set()  # its row is leased at once rather than at the next renewal

    async def _run(self, record: ExecutionRecord) -> None:
        try:
            if record.kind == "import":
                await self._import(record)
            else:
                await self._export(record)
        except asyncio.CancelledError:
            raise
        except QuotaExceeded as exc:
            await self._fail(
                record,
                RATE_LIMIT_QUOTA_EXHAUSTED,
                f"Quota exhausted: this tenant may store at most {exc.limit} {exc.metric}; the batch was not written",
                {"metric": exc.metric, "current": exc.current, "hard_stop_threshold": exc.limit},
            )
        except Missing:
            await self._fail(
                record,
                NOT_FOUND_RESOURCE,
                f"Resource 'collection' not found: '{record.params.get('collection')}'",
                {"resource_type": "collection", "resource_id": record.params.get("collection")},
            )
        except PayloadError as exc:
            await self._fail(record, VALIDATION_INVALID_ENCODING, str(exc), {"param_name": "file_content"})
        except ExportTooLarge as exc:
            await self._fail(
                record,
                VALIDATION_PAYLOAD_TOO_LARGE,
                f"The export exceeds {exc.limit} bytes (executions.max_export_bytes)",
                {"max_bytes": exc.limit},
            )
        except Exception:
            log.exception("execution_crashed", execution_id=record.id)
            await self._fail(record, INTERNAL_ERROR, "The execution failed unexpectedly", None)
        finally:
            # A quick retry may already have registered a newer task under the same id.
            if self._running.get(record.id) is asyncio.current_task():
                del self._running[record.id]
                self._leases.pop(record.id, None)
            self._wake(record.id)
            self._changed.pop(record.id, None)

    async def _fail(self, record: ExecutionRecord, code: str, message: str, details: dict[str, Any] | None) -> None:
        error: dict[str, Any] = {"code": code, "message": message}
        if details is not None:
            error["details"] = details
        failed = functools.partial(
            self.store.transition, record.id, "failed", self._clock(), error=error, attempt=record.attempts
        )
        try:
            await self._retry(record, failed)
        except Exception:
            # The row stays running with no worker: the next sweep fails it (`fail_abandoned`).
            log.warning("execution_fail_unrecorded", execution_id=record.id, code=code)
            return
        log.info("execution_failed", execution_id=record.id, code=code)

    def _wake(self, execution_id: str) -> None:
        event = self._changed.get(execution_id)
        if event is not None:
            event.set()

    async def _import(self, record: ExecutionRecord) -> None:
        payload = await self._retry(record, functools.partial(self.store.payload, record.id))
        if payload is None:
            raise PayloadError("the import's payload is no longer kept")
        rows = await asyncio.to_thread(Rows, payload, _format(record.params), record.params.get("fields"), self._limits)
        total, done = len(rows), record.progress.current
        while done < total:
            batch = self._batch(record, rows, done, total)
            write = functools.partial(self.store.import_batch, record.id, batch, self._clock(), attempt=record.attempts)
            if await self._retry(record, write) == "stopped":
                log.info("execution_stopped", execution_id=record.id, reason="not running", at=done)
                return
            done = batch.done
            self._wake(record.id)
            # The loop serves others between two batches (longer when the operator asks for it).
            await asyncio.sleep(self._settings.batch_pause_seconds)
        latest = await self._retry(record, functools.partial(self.store.load, record.id))
        rejected = latest.rejected if latest is not None else 0
        result = {"imported": total - rejected, "rejected": rejected, "rows": total}
        await self._complete(record, result, f"imported {total - rejected} of {total} rows")

    def _batch(self, record: ExecutionRecord, rows: Rows, done: int, total: int) -> Batch:
        """The next batch of the import: its records (new ids and etags) and its rejected rows."""
        chunk = rows.batch(done, self._settings.batch_size)
        stamp = timestamp(self._clock())
        collection = str(record.params["collection"])
        return Batch(
            tenant=record.owner,
            collection=collection,
            records=[NewRecord(collection, new_id(), r.data, new_etag(), stamp) for r in chunk if r.data is not None],
            rejected=[{"row": r.number, "reason": r.reason} for r in chunk if r.data is None],
            done=done + len(chunk),
            total=total,
            quota=self._quota(),
            report_cap=self._settings.report_cap,
        )

    async def _export(self, record: ExecutionRecord) -> None:
        collection = str(record.params["collection"])
        found = await self._retry(record, functools.partial(self._records.get_collection, record.owner, collection))
        if found is None:
            raise Missing(collection)
        if self._exports.locked():
            # This replica writes `max_concurrent_exports` already: the export waits its turn, running.
            queued = Progress(0, found.record_count, QUEUED)
            if not await self._retry(record, functools.partial(self._set_progress, record, queued)):
                return
        async with self._exports:
            result = await self._exporter.run(record, collection, found.record_count)
        if result is None:
            return
        await self._complete(record, result, f"exported {result['exported']} records")

    async def _complete(self, record: ExecutionRecord, result: dict[str, Any], message: str) -> None:
        completed = functools.partial(
            self.store.transition,
            record.id,
            "completed",
            self._clock(),
            result=result,
            message=message,
            attempt=record.attempts,
        )
        await self._retry(record, completed)

    async def _set_progress(self, record: ExecutionRecord, progress: Progress) -> bool:
        return await self.store.set_progress(record.id, progress, self._clock(), attempt=record.attempts)

    async def _retry(self, record: ExecutionRecord, call: Callable[[], Awaitable[T]]) -> T:
        return await retrying(call, budget=self._settings.store_retry_seconds, execution_id=record.id)

    async def _sweep_forever(self) -> None:
        while True:
            await asyncio.sleep(SWEEP_SECONDS)
            try:
                await self._sweep()
            except Exception:
                log.warning("execution_sweep_failed")

    async def _lease_forever(self) -> None:
        while not self.stopping:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._renew_now.wait(), self.lease_seconds / RENEWALS_PER_LEASE)
            self._renew_now.clear()
            if self.stopping:
                return
            try:
                await self.renew_and_take_over()
            except Exception:
                log.warning("execution_lease_failed")

    async def renew_and_take_over(self) -> None:
        """Renew this replica's leases (one statement), then resume what lost replicas left."""
        await self.store.renew(self.lease_seconds, self._clock())
        if self.stopping:
            return
        taken = await self.store.take_over(
            self._clock(), lease_seconds=self.lease_seconds, max_takeovers=self._settings.max_takeovers
        )
        for record in taken.resumed:
            log.warning("execution_taken_over", execution_id=record.id, attempt=record.attempts)
            self.launch(record)
        for execution_id in taken.ended:
            log.warning("execution_orphaned", execution_id=execution_id, reason="lease ran out")
        outcomes = ["resumed"] * len(taken.resumed) + ["ended"] * len(taken.ended)
        for listener in self.on_takeover:
            for outcome in outcomes:
                listener(outcome)

    async def _sweep(self) -> None:
        now = self._clock()
        for execution_id in await self.store.recover(now, LIVE_SECONDS):
            log.info("execution_orphaned", execution_id=execution_id)
        if not self._starting:
            # A row started after `now` is newer than `before`; one started earlier is in `_running`.
            for execution_id in await self.store.fail_abandoned(set(self._running), now, now):
                log.warning("execution_abandoned", execution_id=execution_id)
        await self.store.purge(now - self._settings.retention_seconds)


def _format(params: dict[str, Any]) -> Format:
    return "csv" if params.get("format") == "csv" else "ndjson"
