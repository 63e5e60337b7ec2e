"""The worker: runs each execution as an asyncio task on the replica that accepted (or retried) it.

The row is the truth (store/executions.py). The worker never holds state another replica needs:
between two batches it learns of a cancellation from the batch's own transaction (`import_batch`
writes nothing once the row is not `running`) or, for an export, from `set_progress`. A
cancellation on any replica therefore stops the work at the next batch boundary, with no batch
half-written. `changed(id)` wakes followers on this replica (a call following its execution) after
every batch; followers elsewhere poll the row.

On start, and every `SWEEP_SECONDS`, the worker fails what dead replicas left running (`recover`)
and deletes executions that ended longer ago than the retention. On stop it fails its own running
executions with a reason (a retry resumes them), so a restart never leaves one `running` forever.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any

import orjson
import structlog

from aql_mcp.executions.rows import Format, PayloadError, Rows
from aql_mcp.operations.payload import Limits
from aql_mcp.operations.results import INTERNAL_ERROR, NOT_FOUND_RESOURCE, RATE_LIMIT_QUOTA_EXHAUSTED
from aql_mcp.plugins.records import new_etag, new_id, record_wire
from aql_mcp.settings import ExecutionSettings
from aql_mcp.store.executions import Batch, ExecutionRecord, ExecutionStore, Progress
from aql_mcp.store.listing import Listing
from aql_mcp.store.records import Missing, NewRecord, Quota, QuotaExceeded, RecordStore, timestamp

log = structlog.get_logger("aql_mcp.executions")
# How often the worker looks for executions left by replicas that died, and purges old ones.
SWEEP_SECONDS = 15.0
# A replica not heard from for this long is gone (the PostgreSQL bus's three missed heartbeats).
LIVE_SECONDS = 15.0
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
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self._records = records
        self._settings = settings
        self._quota = quota
        self._limits = limits
        self._clock = clock
        self._running: dict[str, asyncio.Task[None]] = {}
        self._changed: dict[str, asyncio.Event] = {}
        self._sweeper: asyncio.Task[None] | None = None
        self.stopping = False

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

    async def stop(self) -> None:
        self.stopping = True
        if self._sweeper is not None:
            self._sweeper.cancel()
            await asyncio.gather(self._sweeper, return_exceptions=True)
        running, self._running = dict(self._running), {}
        for task in running.values():
            task.cancel()
        await asyncio.gather(*running.values(), return_exceptions=True)
        for execution_id in running:
            with contextlib.suppress(Exception):
                await self.store.transition(execution_id, "failed", self._clock(), error=SHUT_DOWN)
                log.info("execution_stopped", execution_id=execution_id, reason="shutdown")

    def changed(self, execution_id: str) -> asyncio.Event:
        """Set after every batch of the execution, if it runs here: a follower's wake-up."""
        return self._changed.setdefault(execution_id, asyncio.Event())

    def forget(self, execution_id: str) -> None:
        if execution_id not in self._running:
            self._changed.pop(execution_id, None)

    def launch(self, record: ExecutionRecord) -> None:
        """Run the execution (already `running` on this replica) in the background."""
        task = asyncio.create_task(self._run(record), name=f"execution-{record.id}")
        self._running[record.id] = task

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
                record.id,
                RATE_LIMIT_QUOTA_EXHAUSTED,
                f"Quota exhausted: this tenant may store at most {exc.limit} {exc.metric}; the batch was not written",
                {"metric": exc.metric, "current": exc.current, "hard_stop_threshold": exc.limit},
            )
        except Missing:
            await self._fail(
                record.id,
                NOT_FOUND_RESOURCE,
                f"Resource 'collection' not found: '{record.params.get('collection')}'",
                {"resource_type": "collection", "resource_id": record.params.get("collection")},
            )
        except PayloadError as exc:
            await self._fail(record.id, "VALIDATION_INVALID_ENCODING", str(exc), {"param_name": "file_content"})
        except Exception:
            log.exception("execution_crashed", execution_id=record.id)
            await self._fail(record.id, INTERNAL_ERROR, "The execution failed unexpectedly", None)
        finally:
            self._running.pop(record.id, None)
            self._wake(record.id)

    async def _fail(self, execution_id: str, code: str, message: str, details: dict[str, Any] | None) -> None:
        error: dict[str, Any] = {"code": code, "message": message}
        if details is not None:
            error["details"] = details
        with contextlib.suppress(Exception):
            await self.store.transition(execution_id, "failed", self._clock(), error=error)
        log.info("execution_failed", execution_id=execution_id, code=code)

    def _wake(self, execution_id: str) -> None:
        event = self._changed.get(execution_id)
        if event is not None:
            event.set()

    async def _import(self, record: ExecutionRecord) -> None:
        payload = await self.store.payload(record.id)
        if payload is None:
            raise PayloadError("the import's payload is no longer kept")
        params = record.params
        fields = params.get("fields")
        rows = await asyncio.to_thread(Rows, payload, _format(params), fields, self._limits)
        total, done = len(rows), record.progress.current
        size, pause = self._settings.batch_size, self._settings.batch_pause_seconds
        while done < total:
            chunk = rows.batch(done, size)
            stamp = timestamp(self._clock())
            collection = str(params["collection"])
            batch = Batch(
                tenant=record.owner,
                collection=collection,
                records=[
                    NewRecord(collection, new_id(), r.data, new_etag(), stamp) for r in chunk if r.data is not None
                ],
                rejected=[{"row": r.number, "reason": r.reason} for r in chunk if r.data is None],
                done=done + len(chunk),
                total=total,
                quota=self._quota(),
                report_cap=self._settings.report_cap,
            )
            if await self.store.import_batch(record.id, batch, self._clock()) == "stopped":
                log.info("execution_stopped", execution_id=record.id, reason="not running", at=done)
                return
            done = batch.done
            self._wake(record.id)
            if pause:
                await asyncio.sleep(pause)
            else:
                await asyncio.sleep(0)  # the loop serves others between two batches
        latest = await self.store.load(record.id)
        rejected = latest.rejected if latest is not None else 0
        result = {"imported": total - rejected, "rejected": rejected, "rows": total}
        await self.store.transition(
            record.id, "completed", self._clock(), result=result, message=f"imported {total - rejected} of {total} rows"
        )

    async def _export(self, record: ExecutionRecord) -> None:
        collection = str(record.params["collection"])
        found = await self._records.get_collection(record.owner, collection)
        if found is None:
            raise Missing(collection)
        total, done, cursor = found.record_count, 0, None
        parts: list[bytes] = []
        size = 0
        while True:
            page = await self._records.list_records(
                record.owner, collection, Listing(size=self._settings.batch_size, cursor=cursor)
            )
            for stored, key in page.items:
                line = orjson.dumps(record_wire(stored)) + b"\n"
                size += len(line)
                parts.append(line)
                cursor = key
            if size > self._settings.max_export_bytes:
                await self._fail(
                    record.id,
                    "VALIDATION_PAYLOAD_TOO_LARGE",
                    f"The export exceeds {self._settings.max_export_bytes} bytes (executions.max_export_bytes)",
                    {"max_bytes": self._settings.max_export_bytes},
                )
                return
            done += len(page.items)
            if not await self.store.set_progress(record.id, Progress(done, max(total, done)), self._clock()):
                return
            self._wake(record.id)
            if not page.has_next:
                break
        await self.store.store_output(record.id, b"".join(parts))
        result = {"exported": done, "bytes": size, "uri": f"records://exports/{record.id}"}
        message = f"exported {done} records"
        await self.store.transition(record.id, "completed", self._clock(), result=result, message=message)

    async def _sweep_forever(self) -> None:
        while True:
            await asyncio.sleep(SWEEP_SECONDS)
            try:
                await self._sweep()
            except Exception:
                log.warning("execution_sweep_failed")

    async def _sweep(self) -> None:
        now = self._clock()
        for execution_id in await self.store.recover(now, LIVE_SECONDS):
            log.info("execution_orphaned", execution_id=execution_id)
        await self.store.purge(now - self._settings.retention_seconds)


def _format(params: dict[str, Any]) -> Format:
    return "csv" if params.get("format") == "csv" else "ndjson"
