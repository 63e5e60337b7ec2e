"""`ExecutionStore` on SQLite: each method one transaction on the writer (or one read).

One process owns the file, so a replica other than this process's is gone: every execution still
live under another replica name was left by an earlier run of the service (`recover`)."""

from __future__ import annotations

import secrets
import sqlite3
from collections.abc import Collection
from dataclasses import replace
from typing import Any

import orjson

from aql_mcp.plugin import SqliteEngine
from aql_mcp.plugins.executions import sqlite_leases
from aql_mcp.plugins.executions.store import (
    ABANDONED,
    COLUMNS,
    LIVE,
    RUNNING_MESSAGE_SQL,
    Batch,
    BatchOutcome,
    Cancelled,
    ExecutionRecord,
    ExecutionStatus,
    Progress,
    RetainedBytesExceeded,
    Takeover,
    execution_record,
    execution_row,
    extend_report,
    failed_message,
    json_or_none,
    sources_of,
)
from aql_mcp.plugins.records.sqlite import insert_records

SELECT = f"SELECT {COLUMNS} FROM executions"  # noqa: S608 - constant columns
INSERT = f"INSERT INTO executions ({COLUMNS}, payload) VALUES ({', '.join('?' * 21)})"  # noqa: S608
LIVE_SQL = "('pending', 'running')"
# What an owner's executions keep (import payloads, export outputs and parts), in bytes.
RETAINED = (
    "SELECT coalesce(sum(coalesce(length(payload), 0) + coalesce(length(output), 0) + "
    "(SELECT coalesce(sum(length(data)), 0) FROM execution_parts WHERE execution_id = executions.id)), 0) "
    "FROM executions WHERE owner = ?"
)
# A worker's write holds only while this replica still runs the attempt it started.
LEASE = " AND replica = ? AND attempts = ?"
# What `cancel` leaves in the progress message when a session's end cancels an execution.
SESSION_ENDED = "cancelled: the session ended (MCP-AQL 2.3.3)"
# ... and when the replica that created it could not start it.
NEVER_STARTED = "cancelled: the replica that accepted it could not start it"


def _in(statuses: tuple[ExecutionStatus, ...]) -> str:
    return "(" + ", ".join(f"'{s}'" for s in statuses) + ")"


class SqliteExecutionStore:
    """`ExecutionStore` on the service's SQLite engine."""

    def __init__(self, engine: SqliteEngine) -> None:
        self._engine = engine
        # A new name for every start: what an earlier run left running is recognisably not ours.
        self._replica = "sqlite-" + secrets.token_hex(6)

    @property
    def replica(self) -> str:
        return self._replica

    async def create(
        self,
        record: ExecutionRecord,
        payload: bytes | None,
        *,
        max_live_per_owner: int,
        max_retained_bytes: int | None = None,
    ) -> bool:
        def admit(db: sqlite3.Connection) -> bool:
            live = db.execute(
                f"SELECT count(*) FROM executions WHERE owner = ? AND status IN {LIVE_SQL}",  # noqa: S608
                (record.owner,),
            ).fetchone()[0]
            if live >= max_live_per_owner:
                return False
            if max_retained_bytes is not None:
                kept = db.execute(RETAINED, (record.owner,)).fetchone()[0]
                if kept + len(payload or b"") > max_retained_bytes:
                    raise RetainedBytesExceeded(int(kept), max_retained_bytes)
            db.execute(INSERT, (*execution_row(replace(record, replica=self._replica)), payload))
            return True

        return await self._engine.write(admit)

    async def get(self, execution_id: str, owner: str) -> ExecutionRecord | None:
        row = await self._engine.read(
            lambda db: db.execute(f"{SELECT} WHERE id = ? AND owner = ?", (execution_id, owner)).fetchone()
        )
        return execution_record(row) if row else None

    async def load(self, execution_id: str) -> ExecutionRecord | None:
        row = await self._engine.read(lambda db: db.execute(f"{SELECT} WHERE id = ?", (execution_id,)).fetchone())
        return execution_record(row) if row else None

    async def payload(self, execution_id: str) -> bytes | None:
        row = await self._engine.read(
            lambda db: db.execute("SELECT payload FROM executions WHERE id = ?", (execution_id,)).fetchone()
        )
        return None if row is None or row[0] is None else bytes(row[0])

    async def list_executions(
        self,
        owner: str,
        *,
        status: ExecutionStatus | None,
        limit: int,
        principal: str | None = None,
        before: tuple[float, str] | None = None,
    ) -> list[ExecutionRecord]:
        where: list[str] = ["owner = ?"]
        args: list[Any] = [owner]
        if status is not None:
            where.append("status = ?")
            args.append(status)
        if principal is not None:
            where.append("principal = ?")
            args.append(principal)
        if before is not None:
            where.append("(created_at, id) < (?, ?)")
            args.extend(before)
        rows = await self._engine.read(
            lambda db: db.execute(
                f"{SELECT} WHERE {' AND '.join(where)} ORDER BY created_at DESC, id DESC LIMIT ?",
                (*args, limit),
            ).fetchall()
        )
        return [execution_record(row) for row in rows]

    async def start(self, execution_id: str, now: float) -> ExecutionRecord | None:
        row = await self._engine.write(
            lambda db: db.execute(
                "UPDATE executions SET status = 'running', replica = ?, started_at = ?, updated_at = ?, "  # noqa: S608
                f"progress_message = {RUNNING_MESSAGE_SQL}, "
                f"attempts = attempts + 1 WHERE id = ? AND status = 'pending' RETURNING {COLUMNS}",
                (self._replica, now, now, execution_id),
            ).fetchone()
        )
        return execution_record(row) if row else None

    async def retry(self, execution_id: str, owner: str, now: float) -> ExecutionRecord | None:
        row = await self._engine.write(
            lambda db: db.execute(
                "UPDATE executions SET status = 'running', replica = ?, error = NULL, finished_at = NULL, "  # noqa: S608
                f"progress_message = {RUNNING_MESSAGE_SQL}, updated_at = ?, attempts = attempts + 1 "
                "WHERE id = ? AND owner = ? AND status = 'failed' "
                f"RETURNING {COLUMNS}",
                (self._replica, now, execution_id, owner),
            ).fetchone()
        )
        return execution_record(row) if row else None

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
        sources = sources_of(to)
        if not sources:
            return False
        ended = to != "running"
        # A completed or cancelled execution is never retried: its payload is not needed any more.
        drop_payload = to in ("completed", "cancelled")
        message = failed_message(error, message) if to == "failed" else message
        values = (to, json_or_none(error), json_or_none(result), message, now, ended, now, drop_payload, execution_id)
        lease, held = ("", ()) if attempt is None else (LEASE, (self._replica, attempt))
        changed = await self._engine.write(
            lambda db: (
                db.execute(
                    "UPDATE executions SET status = ?, error = ?, result = coalesce(?, result), "  # noqa: S608
                    "progress_message = coalesce(?, progress_message), updated_at = ?, "
                    "finished_at = CASE WHEN ? THEN ? ELSE finished_at END, "
                    "payload = CASE WHEN ? THEN NULL ELSE payload END "
                    f"WHERE id = ? AND status IN {_in(sources)}{lease}",
                    (*values, *held),
                ).rowcount
            )
        )
        return bool(changed == 1)

    async def cancel(self, execution_id: str, owner: str, now: float, message: str) -> Cancelled:
        def cancel(db: sqlite3.Connection) -> Cancelled:
            found = db.execute(
                "SELECT status FROM executions WHERE id = ? AND owner = ?", (execution_id, owner)
            ).fetchone()
            if found is None:
                return "unknown"
            if found[0] not in LIVE:
                return "ended"
            _cancel(db, "id = ?", (execution_id,), now, message)
            return "cancelled"

        return await self._engine.write(cancel)

    async def cancel_session(self, session_id: str, now: float) -> int:
        return await self._engine.write(lambda db: _cancel(db, "session_id = ?", (session_id,), now, SESSION_ENDED))

    async def end_session(self, session_id: str, now: float) -> list[ExecutionRecord]:
        def work(db: sqlite3.Connection) -> list[ExecutionRecord]:
            rows = db.execute(
                "UPDATE executions SET status = 'cancelled', progress_message = ?, updated_at = ?, finished_at = ?, "  # noqa: S608
                f"payload = NULL WHERE session_id = ? AND status IN {LIVE_SQL} RETURNING {COLUMNS}",
                (SESSION_ENDED, now, now, session_id),
            ).fetchall()
            return [execution_record(row) for row in rows]

        return await self._engine.write(work)

    async def import_batch(self, execution_id: str, batch: Batch, now: float, *, attempt: int) -> BatchOutcome:
        def write(db: sqlite3.Connection) -> BatchOutcome:
            row = db.execute(
                "SELECT status, report, replica, attempts, progress_current FROM executions WHERE id = ?",
                (execution_id,),
            ).fetchone()
            if row is None or (row[0], row[2], row[3]) != ("running", self._replica, attempt):
                return "stopped"
            if row[4] >= batch.done:
                return "written"  # a repeat of a batch that committed (docs/executions.md)
            insert_records(db, batch.tenant, batch.collection, batch.records, batch.quota)
            report = extend_report(orjson.loads(row[1]), batch.rejected, batch.report_cap)
            db.execute(
                "UPDATE executions SET progress_current = ?, progress_total = ?, report = ?, "
                "rejected = rejected + ?, updated_at = ? WHERE id = ?",
                (batch.done, batch.total, orjson.dumps(report), len(batch.rejected), now, execution_id),
            )
            return "written"

        return await self._engine.write(write)

    async def set_progress(self, execution_id: str, progress: Progress, now: float, *, attempt: int) -> bool:
        changed = await self._engine.write(
            lambda db: (
                db.execute(
                    "UPDATE executions SET progress_current = ?, progress_total = ?, "
                    "progress_message = coalesce(?, progress_message), updated_at = ? "
                    "WHERE id = ? AND status = 'running' AND replica = ? AND attempts = ?",
                    (progress.current, progress.total, progress.message, now, execution_id, self._replica, attempt),
                ).rowcount
            )
        )
        return bool(changed == 1)

    async def clear_output(self, execution_id: str, *, attempt: int) -> bool:
        def clear(db: sqlite3.Connection) -> bool:
            if not _holds(db, execution_id, self._replica, attempt):
                return False
            db.execute("DELETE FROM execution_parts WHERE execution_id = ?", (execution_id,))
            return True

        return await self._engine.write(clear)

    async def store_part(self, execution_id: str, part: int, data: bytes, *, attempt: int) -> bool:
        def store(db: sqlite3.Connection) -> bool:
            if not _holds(db, execution_id, self._replica, attempt):
                return False
            db.execute(
                "INSERT INTO execution_parts (execution_id, part, data) VALUES (?, ?, ?) "
                "ON CONFLICT (execution_id, part) DO UPDATE SET data = excluded.data",
                (execution_id, part, data),
            )
            return True

        return await self._engine.write(store)

    async def output_part(self, execution_id: str, owner: str, part: int) -> bytes | None:
        def read(db: sqlite3.Connection) -> Any:
            # One statement, one snapshot: the part, or an export's output from before parts existed.
            return db.execute(
                "SELECT coalesce((SELECT data FROM execution_parts WHERE execution_id = e.id AND part = ?), "
                "CASE WHEN ? = 0 THEN e.output END) FROM executions e "
                "WHERE e.id = ? AND e.owner = ? AND e.status = 'completed'",
                (part, part, execution_id, owner),
            ).fetchone()

        # In the owner's fair turn on the readers (store/fair_share.py): a tenant reading its parts
        # in a loop holds no more than its share.
        row = await self._engine.read(read, tenant=owner)
        return None if row is None or row[0] is None else bytes(row[0])

    async def recover(self, now: float, live_seconds: float) -> list[str]:
        def recover(db: sqlite3.Connection) -> list[str]:
            # One process owns the file: any other replica name is an earlier run's, gone.
            found = db.execute(
                f"SELECT id, status FROM executions WHERE status IN {LIVE_SQL} AND replica IS NOT ?",  # noqa: S608
                (self._replica,),
            ).fetchall()
            for execution_id, status in found:
                _orphan(db, execution_id, status, now)
            return [row[0] for row in found]

        return await self._engine.write(recover)

    async def renew(self, lease_seconds: float, now: float) -> int:
        return await sqlite_leases.renew(self._engine, self._replica, lease_seconds, now)

    async def take_over(self, now: float, *, lease_seconds: float, max_takeovers: int) -> Takeover:
        return await sqlite_leases.take_over(
            self._engine, self._replica, now, ORPHANED, lease_seconds=lease_seconds, max_takeovers=max_takeovers
        )

    async def fail_abandoned(self, keep: Collection[str], before: float, now: float) -> list[str]:
        kept = set(keep)

        def fail(db: sqlite3.Connection) -> list[str]:
            found = db.execute(
                f"SELECT id, status FROM executions WHERE status IN {LIVE_SQL} AND replica = ? AND updated_at < ?",  # noqa: S608
                (self._replica, before),
            ).fetchall()
            lost = [(row[0], row[1]) for row in found if row[0] not in kept]
            for execution_id, status in lost:
                if status == "running":
                    db.execute(
                        "UPDATE executions SET status = 'failed', error = ?, progress_message = ?, updated_at = ?, "
                        "finished_at = ? WHERE id = ? AND status = 'running'",
                        (orjson.dumps(ABANDONED), failed_message(ABANDONED), now, now, execution_id),
                    )
                else:
                    _cancel(db, "id = ?", (execution_id,), now, NEVER_STARTED)
            return [execution_id for execution_id, _ in lost]

        return await self._engine.write(fail)

    async def purge(self, before: float) -> int:
        def purge(db: sqlite3.Connection) -> int:
            ended = f"status NOT IN {LIVE_SQL} AND finished_at < ?"
            db.execute(
                f"DELETE FROM execution_parts WHERE execution_id IN (SELECT id FROM executions WHERE {ended})",  # noqa: S608
                (before,),
            )
            return int(db.execute(f"DELETE FROM executions WHERE {ended}", (before,)).rowcount)  # noqa: S608

        return await self._engine.write(purge)


def _cancel(db: sqlite3.Connection, where: str, args: tuple[Any, ...], now: float, message: str) -> int:
    return int(
        db.execute(
            "UPDATE executions SET status = 'cancelled', progress_message = ?, updated_at = ?, finished_at = ?, "  # noqa: S608
            f"payload = NULL WHERE {where} AND status IN {LIVE_SQL}",
            (message, now, now, *args),
        ).rowcount
    )


def _holds(db: sqlite3.Connection, execution_id: str, replica: str, attempt: int) -> bool:
    """Whether the execution still runs on `replica` under `attempt` (a worker's lease)."""
    found = db.execute(
        f"SELECT 1 FROM executions WHERE id = ? AND status = 'running'{LEASE}",  # noqa: S608 - constant
        (execution_id, replica, attempt),
    ).fetchone()
    return found is not None


def _orphan(db: sqlite3.Connection, execution_id: str, status: str, now: float) -> None:
    """§8.4.2 allows a running execution to fail and a pending one only to be cancelled."""
    if status == "running":
        error = orjson.dumps(ORPHANED)
        db.execute(
            "UPDATE executions SET status = 'failed', error = ?, progress_message = ?, updated_at = ?, finished_at = ? "
            "WHERE id = ?",
            (error, failed_message(ORPHANED), now, now, execution_id),
        )
    else:
        _cancel(db, "id = ?", (execution_id,), now, "cancelled: the replica that accepted it stopped")


ORPHANED: dict[str, Any] = {
    "code": "INTERNAL_ERROR",
    "message": "The replica running this execution stopped before it ended; retry_execution resumes it",
    "details": {"reason": "replica_stopped"},
}
