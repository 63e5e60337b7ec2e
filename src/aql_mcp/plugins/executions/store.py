"""Executions of the `executions` plugin (MCP-AQL §8.4), kept in the store (docs/executions.md).

An execution is created by the replica that accepted the call and run there, but any replica may
be asked about it: the row is the truth. Every state change is one conditional UPDATE in the
engine that allows only the §8.4.2 transitions:

    pending -> running | cancelled;  running -> completed | failed | cancelled;  failed -> running

so a cancellation and a completion racing each other, on any replicas, leave whichever committed
first. A client reads and changes only its own executions (`owner`); another's is simply not found.

An import writes its records in batches, each with `import_batch`: the status check, the records
(quota included), the progress and the rejected rows of the batch commit together or not at all,
so a cancellation is either before a batch (nothing of it is written) or after it (all of it is
counted in `progress`). The record count therefore always equals what the execution reports.

Every write of the worker is fenced by its lease: the replica that started the attempt and the
attempt's number (`attempts`, raised by each start, retry and takeover). A worker whose execution
another replica failed, retried or took over meanwhile (a replica thought dead) writes nothing
more: its batch is `stopped`, its progress, output and final transition refused.

Each replica renews the time lease of all its live executions with one statement (`renew`: the
current attempt's row in `execution_leases`, on the database's clock); any replica takes over a
live execution whose lease ran out (`take_over`): a running one is claimed and resumed there, a
pending one cancelled.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import orjson

from aql_mcp.plugins.records.store import NewRecord, Quota

ExecutionStatus = Literal["pending", "running", "completed", "failed", "cancelled"]
STATUSES: tuple[ExecutionStatus, ...] = ("pending", "running", "completed", "failed", "cancelled")
LIVE: tuple[ExecutionStatus, ...] = ("pending", "running")
# §8.4.2, and nothing else: (from, to).
TRANSITIONS: frozenset[tuple[ExecutionStatus, ExecutionStatus]] = frozenset(
    {
        ("pending", "running"),
        ("pending", "cancelled"),
        ("running", "completed"),
        ("running", "failed"),
        ("running", "cancelled"),
        ("failed", "running"),
    }
)
Cancelled = Literal["unknown", "cancelled", "ended"]
# What a running execution's progress message says it does (docs/executions.md): set by its start
# and each retry, so the `pending` of its creation never outlives it; a failure puts its error's
# message there (`failed_message`).
IMPORTING = "importing rows"
EXPORTING = "exporting records"
RUNNING_MESSAGE_SQL = f"CASE kind WHEN 'import' THEN '{IMPORTING}' WHEN 'export' THEN '{EXPORTING}' ELSE NULL END"


def failed_message(error: dict[str, Any] | None, message: str | None = None) -> str | None:
    """A failed execution's progress message: why it failed (its error's message), or the one given."""
    if message is None and error is not None and error.get("message"):
        return f"failed: {error['message']}"
    return message


class RetainedBytesExceeded(Exception):
    """The owner's executions already keep this many bytes (import payloads, export outputs)."""

    def __init__(self, current: int, limit: int) -> None:
        super().__init__(f"retained bytes {current} of {limit}")
        self.current = current
        self.limit = limit


@dataclass(slots=True)
class Progress:
    current: int = 0
    total: int | None = None
    message: str | None = None

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"current": self.current}
        if self.total is not None:
            out["total"] = self.total
        if self.message:
            out["message"] = self.message
        return out


@dataclass(slots=True)
class ExecutionRecord:
    """An execution as stored. `params` are the call's parameters without the payload, which is
    kept apart (`payload`, loaded only by the worker) while a retry may still need it; `report`
    holds the first rejected rows (row number and reason), capped."""

    id: str
    owner: str
    kind: str
    status: ExecutionStatus
    created_at: float
    updated_at: float
    session_id: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    progress: Progress = field(default_factory=Progress)
    report: list[dict[str, Any]] = field(default_factory=list)
    rejected: int = 0
    error: dict[str, Any] | None = None
    result: dict[str, Any] | None = None
    replica: str | None = None
    started_at: float | None = None
    finished_at: float | None = None
    attempts: int = 0
    # The digest of the principal that started it: MCP tasks are bound to it (plugins/executions/legacy_tasks.py).
    principal: str | None = None


@dataclass(frozen=True, slots=True)
class Batch:
    """One batch of an import: the rows it covers (`done` rows processed so far, including these),
    the records to write and the rows rejected, each `{"row": n, "reason": "..."}`."""

    tenant: str
    collection: str
    records: list[NewRecord]
    rejected: list[dict[str, Any]]
    done: int
    total: int | None
    quota: Quota
    report_cap: int


BatchOutcome = Literal["written", "stopped"]


@dataclass(frozen=True, slots=True)
class Takeover:
    """What `take_over` did: the executions this replica now runs (as the claim left them: their
    `attempts` is the new worker's lease), and the ids of those it ended instead (failed past
    `max_takeovers`, or cancelled while still pending)."""

    resumed: list[ExecutionRecord] = field(default_factory=list)
    ended: list[str] = field(default_factory=list)


class ExecutionStore(Protocol):
    @property
    def replica(self) -> str:
        """This process's name among the replicas sharing the store: the one running what it starts."""
        ...

    async def create(
        self,
        record: ExecutionRecord,
        payload: bytes | None,
        *,
        max_live_per_owner: int,
        max_retained_bytes: int | None = None,
    ) -> bool:
        """Insert a `pending` execution unless the owner has `max_live_per_owner` live (pending or
        running) ones; counted and inserted atomically. With `max_retained_bytes`, raises
        `RetainedBytesExceeded` (nothing inserted) when the owner's kept payloads and outputs plus
        this payload would exceed it. The row names this replica from the start,
        so no other replica's recovery takes it for one left by a replica that is gone."""
        ...

    async def get(self, execution_id: str, owner: str) -> ExecutionRecord | None: ...
    async def load(self, execution_id: str) -> ExecutionRecord | None:
        """Whoever owns it: for the worker, never for a client's request."""
        ...

    async def payload(self, execution_id: str) -> bytes | None:
        """The import's payload, while it is kept (until the execution completes or is cancelled)."""
        ...

    async def list_executions(
        self,
        owner: str,
        *,
        status: ExecutionStatus | None,
        limit: int,
        principal: str | None = None,
        before: tuple[float, str] | None = None,
    ) -> list[ExecutionRecord]:
        """The owner's executions (only `principal`'s when given), newest first by
        `(created_at, id)`; with `before`, only those after that key in this order (a keyset
        cursor: rows inserted meanwhile neither shift nor repeat a page)."""
        ...

    async def start(self, execution_id: str, now: float) -> ExecutionRecord | None:
        """pending -> running on this replica: the row as the update left it (its `attempts` is the
        worker's lease), or None when it was not pending any more."""
        ...

    async def retry(self, execution_id: str, owner: str, now: float) -> ExecutionRecord | None:
        """failed -> running on this replica, error cleared (progress kept: the import resumes); the
        row as the update left it, or None when it was not failed."""
        ...

    async def transition(
        self,
        execution_id: str,
        to: ExecutionStatus,
        now: float,
        *,
        error: dict[str, Any] | None = None,
        result: dict[str, Any] | None = None,
        message: str | None = None,
        attempt: int | None = None,
    ) -> bool:
        """Any §8.4.2 transition into `to` from whichever status allows it; False when the row is
        in none of them (a forbidden transition changes nothing). With `attempt` (a worker's
        write), only while this replica still holds that attempt."""
        ...

    async def cancel(self, execution_id: str, owner: str, now: float, message: str) -> Cancelled:
        """`cancel_execution`: a live execution becomes `cancelled`; `ended` when it already was
        terminal (unchanged), `unknown` when the owner has no such execution."""
        ...

    async def cancel_session(self, session_id: str, now: float) -> int:
        """MCP-AQL §2.3.3: the session ended, its live executions are cancelled."""
        ...

    async def end_session(self, session_id: str, now: float) -> list[ExecutionRecord]:
        """`cancel_session`, answering the executions it cancelled as they are afterwards (their
        audit records name them, plugins/executions/audited.py)."""
        ...

    async def import_batch(self, execution_id: str, batch: Batch, now: float, *, attempt: int) -> BatchOutcome:
        """Write one batch while the execution is `running` under this replica's `attempt`: its
        records, progress and rejected rows in one transaction; `stopped` (nothing written) once it
        is not running any more, or runs under another lease. A batch the row already counts
        (`progress.current` at `batch.done` or past it: a repeat after a commit whose answer was
        lost) is `written` with nothing written again, so the worker may retry a batch.
        A record quota exceeded raises `QuotaExceeded` with nothing written."""
        ...

    async def set_progress(self, execution_id: str, progress: Progress, now: float, *, attempt: int) -> bool:
        """Record progress while running under the lease; False otherwise (the worker stops)."""
        ...

    async def clear_output(self, execution_id: str, *, attempt: int) -> bool:
        """Drop the parts an earlier attempt of the export wrote; False (nothing dropped) unless the
        execution still runs under the lease."""
        ...

    async def store_part(self, execution_id: str, part: int, data: bytes, *, attempt: int) -> bool:
        """Part `part` (0-based) of an export's NDJSON, kept for
        `records://exports/{execution_id}/parts/{part}`: one short transaction, written again
        unchanged if it is repeated; False (nothing kept) unless the execution still runs under the
        lease."""
        ...

    async def output_part(self, execution_id: str, owner: str, part: int) -> bytes | None:
        """Part `part` of the owner's completed export, or None. An export completed before parts
        existed (its NDJSON in one piece) is its own part 0."""
        ...

    async def recover(self, now: float, live_seconds: float) -> list[str]:
        """Executions whose replica is gone (not this one and not heard from within `live_seconds`;
        on PostgreSQL only those without a lease, which are `take_over`'s): a running one becomes
        `failed`, a pending one `cancelled`, each with the reason; their ids."""
        ...

    async def renew(self, lease_seconds: float, now: float) -> int:
        """One statement: the lease of every live execution of this replica ends `lease_seconds`
        from now (the database's clock; `now` only on SQLite, one process). How many it renewed."""
        ...

    async def take_over(self, now: float, *, lease_seconds: float, max_takeovers: int) -> Takeover:
        """Live executions whose lease ran out (database clock; never one without a lease): a
        running one taken over fewer than `max_takeovers` times is claimed by this replica (new
        attempt, fresh lease) to be resumed, a running one past it fails (`replica_stopped`), a
        pending one is cancelled. Each row is claimed by one replica only."""
        ...

    async def fail_abandoned(self, keep: Collection[str], before: float, now: float) -> list[str]:
        """Fail (`details.reason: "worker_lost"`) what runs on this replica, unchanged since
        `before`, with no worker here (its id not in `keep`): a worker that ended without its final
        transition (a store error at that moment) would otherwise leave it running forever. A
        pending one of this replica as old (its start failed) is cancelled. Their ids."""
        ...

    async def purge(self, before: float) -> int:
        """Delete executions that ended before `before`, with their payloads and export parts."""
        ...


# What `fail_abandoned` records: the worker of this replica ended without a final state.
ABANDONED: dict[str, Any] = {
    "code": "INTERNAL_ERROR",
    "message": "The execution's worker ended without recording a final state; retry_execution resumes it",
    "details": {"reason": "worker_lost"},
}


def json_or_none(value: Any) -> bytes | None:
    return None if value is None else orjson.dumps(value)


def execution_row(record: ExecutionRecord) -> tuple[Any, ...]:
    """An execution as the engines store it, in `COLUMNS` order (JSON as bytes)."""
    return (
        record.id,
        record.owner,
        record.kind,
        record.status,
        record.session_id,
        orjson.dumps(record.params),
        record.progress.current,
        record.progress.total,
        record.progress.message,
        orjson.dumps(record.report),
        record.rejected,
        json_or_none(record.error),
        json_or_none(record.result),
        record.replica,
        record.created_at,
        record.updated_at,
        record.started_at,
        record.finished_at,
        record.attempts,
        record.principal,
    )


COLUMNS = (
    "id, owner, kind, status, session_id, params, progress_current, progress_total, progress_message, "
    "report, rejected, error, result, replica, created_at, updated_at, started_at, finished_at, attempts, principal"
)


def execution_record(row: Any) -> ExecutionRecord:
    return ExecutionRecord(
        id=row[0],
        owner=row[1],
        kind=row[2],
        status=row[3],
        session_id=row[4],
        params=orjson.loads(row[5]),
        progress=Progress(int(row[6]), None if row[7] is None else int(row[7]), row[8]),
        report=orjson.loads(row[9]),
        rejected=int(row[10]),
        error=orjson.loads(row[11]) if row[11] is not None else None,
        result=orjson.loads(row[12]) if row[12] is not None else None,
        replica=row[13],
        created_at=row[14],
        updated_at=row[15],
        started_at=row[16],
        finished_at=row[17],
        attempts=int(row[18]),
        principal=row[19],
    )


def sources_of(to: ExecutionStatus) -> tuple[ExecutionStatus, ...]:
    """The statuses §8.4.2 allows to move into `to`."""
    return tuple(source for source, target in TRANSITIONS if target == to)


def extend_report(report: list[dict[str, Any]], rejected: list[dict[str, Any]], cap: int) -> list[dict[str, Any]]:
    return report + rejected[: max(0, cap - len(report))]
