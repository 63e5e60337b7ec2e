"""`ExecutionStore` on PostgreSQL: each method one transaction; a batch locks its execution's row.

A live execution with a lease is taken over once the lease ran out (postgres_leases.py). One
without (written before leases, or not renewed yet) is judged by its replica's heartbeat: when its
row in `replicas` is older than `live_seconds` (database clock), whichever replica runs `recover`
next fails or cancels it."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace
from typing import Any

import asyncpg
import orjson

from aql_mcp.plugin import PostgresEngine
from aql_mcp.plugins.executions import postgres_leases
from aql_mcp.plugins.executions.sqlite import NEVER_STARTED, ORPHANED, SESSION_ENDED
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
from aql_mcp.plugins.records.postgres import insert_records

SELECT = f"SELECT {COLUMNS} FROM executions"  # noqa: S608 - constant columns
LIVE_SQL = "('pending', 'running')"
# The execution's current attempt holds a lease: it is the takeover's (postgres_leases.py), not `recover`'s.
LEASED = "SELECT 1 FROM execution_leases l WHERE l.execution_id = executions.id AND l.attempt = executions.attempts"
# What an owner's executions keep (import payloads, export outputs and parts), in bytes.
RETAINED = (
    "SELECT coalesce(sum(coalesce(octet_length(payload), 0) + coalesce(octet_length(output), 0) + "
    "(SELECT coalesce(sum(octet_length(data)), 0) FROM execution_parts WHERE execution_id = executions.id)), 0) "
    "FROM executions WHERE owner = $1"
)
# Creations by one owner take turns, so two replicas racing for the owner's last slot cannot both win.
OWNER_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended('aql_mcp.executions:' || $1, 0))"
CANCEL = (
    "UPDATE executions SET status = 'cancelled', progress_message = $2, updated_at = $3, finished_at = $3, "  # noqa: S608
    "payload = NULL WHERE {where} AND status IN " + LIVE_SQL
)


class PostgresExecutionStore:
    def __init__(self, engine: PostgresEngine, replica: str) -> None:
        self._engine = engine
        self._replica = replica

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
        async def admit(db: asyncpg.Connection) -> bool:
            await db.execute(OWNER_LOCK, record.owner)
            live = await db.fetchval(
                f"SELECT count(*) FROM executions WHERE owner = $1 AND status IN {LIVE_SQL}",  # noqa: S608
                record.owner,
            )
            if live >= max_live_per_owner:
                return False
            if max_retained_bytes is not None:
                kept = int(await db.fetchval(RETAINED, record.owner))
                if kept + len(payload or b"") > max_retained_bytes:
                    raise RetainedBytesExceeded(kept, max_retained_bytes)
            marks = ", ".join(f"${i}" for i in range(1, 22))
            await db.execute(
                f"INSERT INTO executions ({COLUMNS}, payload) VALUES ({marks})",  # noqa: S608
                *execution_row(replace(record, replica=self._replica)),
                payload,
            )
            return True

        return await self._engine.run(admit)

    async def get(self, execution_id: str, owner: str) -> ExecutionRecord | None:
        row = await self._engine.fetchrow(f"{SELECT} WHERE id = $1 AND owner = $2", execution_id, owner)
        return execution_record(row) if row else None

    async def load(self, execution_id: str) -> ExecutionRecord | None:
        row = await self._engine.fetchrow(f"{SELECT} WHERE id = $1", execution_id)
        return execution_record(row) if row else None

    async def payload(self, execution_id: str) -> bytes | None:
        found = await self._engine.fetchval("SELECT payload FROM executions WHERE id = $1", execution_id)
        return None if found is None else bytes(found)

    async def list_executions(
        self,
        owner: str,
        *,
        status: ExecutionStatus | None,
        limit: int,
        principal: str | None = None,
        before: tuple[float, str] | None = None,
    ) -> list[ExecutionRecord]:
        rows = await self._engine.fetch(
            f"{SELECT} WHERE owner = $1 AND ($2::text IS NULL OR status = $2) "
            "AND ($3::text IS NULL OR principal = $3) "
            "AND ($4::double precision IS NULL OR (created_at, id) < ($4, $5::text)) "
            "ORDER BY created_at DESC, id DESC LIMIT $6",
            owner,
            status,
            principal,
            None if before is None else before[0],
            None if before is None else before[1],
            limit,
        )
        return [execution_record(row) for row in rows]

    async def start(self, execution_id: str, now: float) -> ExecutionRecord | None:
        row = await self._engine.fetchrow(
            "UPDATE executions SET status = 'running', replica = $2, started_at = $3, updated_at = $3, "  # noqa: S608
            f"progress_message = {RUNNING_MESSAGE_SQL}, attempts = attempts + 1 "
            f"WHERE id = $1 AND status = 'pending' RETURNING {COLUMNS}",
            execution_id,
            self._replica,
            now,
        )
        return execution_record(row) if row else None

    async def retry(self, execution_id: str, owner: str, now: float) -> ExecutionRecord | None:
        row = await self._engine.fetchrow(
            "UPDATE executions SET status = 'running', replica = $3, error = NULL, finished_at = NULL, "  # noqa: S608
            f"progress_message = {RUNNING_MESSAGE_SQL}, updated_at = $4, attempts = attempts + 1 "
            "WHERE id = $1 AND owner = $2 AND status = 'failed' "
            f"RETURNING {COLUMNS}",
            execution_id,
            owner,
            self._replica,
            now,
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
        outcome = await self._engine.execute(
            "UPDATE executions SET status = $2, error = $3, result = coalesce($4, result), "
            "progress_message = coalesce($5, progress_message), updated_at = $6, "
            "finished_at = CASE WHEN $7 THEN $6 ELSE finished_at END, "
            "payload = CASE WHEN $8 THEN NULL ELSE payload END "
            "WHERE id = $1 AND status = ANY($9::text[]) "
            "AND ($11::bigint IS NULL OR (replica = $10 AND attempts = $11))",
            execution_id,
            to,
            json_or_none(error),
            json_or_none(result),
            failed_message(error, message) if to == "failed" else message,
            now,
            to != "running",
            to in ("completed", "cancelled"),
            list(sources),
            self._replica,
            attempt,
        )
        return bool(outcome == "UPDATE 1")

    async def cancel(self, execution_id: str, owner: str, now: float, message: str) -> Cancelled:
        async def cancel(db: asyncpg.Connection) -> Cancelled:
            found = await db.fetchval(
                "SELECT status FROM executions WHERE id = $1 AND owner = $2 FOR UPDATE", execution_id, owner
            )
            if found is None:
                return "unknown"
            if found not in LIVE:
                return "ended"
            await db.execute(CANCEL.format(where="id = $1"), execution_id, message, now)
            return "cancelled"

        return await self._engine.run(cancel)

    async def cancel_session(self, session_id: str, now: float) -> int:
        outcome = await self._engine.execute(CANCEL.format(where="session_id = $1"), session_id, SESSION_ENDED, now)
        return int(outcome.rsplit(" ", 1)[-1])

    async def end_session(self, session_id: str, now: float) -> list[ExecutionRecord]:
        query = CANCEL.format(where="session_id = $1") + f" RETURNING {COLUMNS}"
        return [execution_record(row) for row in await self._engine.fetch(query, session_id, SESSION_ENDED, now)]

    async def import_batch(self, execution_id: str, batch: Batch, now: float, *, attempt: int) -> BatchOutcome:
        async def write(db: asyncpg.Connection) -> BatchOutcome:
            # The row lock makes a cancellation (or a retry elsewhere) wait for this batch, or this
            # batch see it.
            row = await db.fetchrow(
                "SELECT status, report, replica, attempts, progress_current FROM executions WHERE id = $1 FOR UPDATE",
                execution_id,
            )
            if row is None or (row[0], row[2], row[3]) != ("running", self._replica, attempt):
                return "stopped"
            if row[4] >= batch.done:
                return "written"  # a repeat of a batch that committed (docs/executions.md)
            await insert_records(db, batch.tenant, batch.collection, batch.records, batch.quota)
            report = extend_report(orjson.loads(row[1]), batch.rejected, batch.report_cap)
            await db.execute(
                "UPDATE executions SET progress_current = $2, progress_total = $3, report = $4, "
                "rejected = rejected + $5, updated_at = $6 WHERE id = $1",
                execution_id,
                batch.done,
                batch.total,
                orjson.dumps(report),
                len(batch.rejected),
                now,
            )
            return "written"

        return await self._engine.run(write)

    async def set_progress(self, execution_id: str, progress: Progress, now: float, *, attempt: int) -> bool:
        outcome = await self._engine.execute(
            "UPDATE executions SET progress_current = $2, progress_total = $3, "
            "progress_message = coalesce($4, progress_message), updated_at = $5 WHERE id = $1 AND status = 'running' "
            "AND replica = $6 AND attempts = $7",
            execution_id,
            progress.current,
            progress.total,
            progress.message,
            now,
            self._replica,
            attempt,
        )
        return bool(outcome == "UPDATE 1")

    async def clear_output(self, execution_id: str, *, attempt: int) -> bool:
        async def clear(db: asyncpg.Connection) -> bool:
            if not await self._holds(db, execution_id, attempt):
                return False
            await db.execute("DELETE FROM execution_parts WHERE execution_id = $1", execution_id)
            return True

        return await self._engine.run(clear)

    async def store_part(self, execution_id: str, part: int, data: bytes, *, attempt: int) -> bool:
        async def store(db: asyncpg.Connection) -> bool:
            if not await self._holds(db, execution_id, attempt):
                return False
            await db.execute(
                "INSERT INTO execution_parts (execution_id, part, data) VALUES ($1, $2, $3) "
                "ON CONFLICT (execution_id, part) DO UPDATE SET data = excluded.data",
                execution_id,
                part,
                data,
            )
            return True

        return await self._engine.run(store)

    async def output_part(self, execution_id: str, owner: str, part: int) -> bytes | None:
        # One statement, one snapshot: the part, or an export's output from before parts existed.
        found = await self._engine.fetchval(
            "SELECT coalesce((SELECT data FROM execution_parts WHERE execution_id = e.id AND part = $3), "
            "CASE WHEN $3 = 0 THEN e.output END) FROM executions e "
            "WHERE e.id = $1 AND e.owner = $2 AND e.status = 'completed'",
            execution_id,
            owner,
            part,
            tenant=owner,
        )
        return None if found is None else bytes(found)

    async def _holds(self, db: asyncpg.Connection, execution_id: str, attempt: int) -> bool:
        """Whether the execution still runs here under `attempt`; the row is share-locked until the
        write commits, so a cancellation or a retry elsewhere waits for it (or it sees them)."""
        found = await db.fetchval(
            "SELECT 1 FROM executions WHERE id = $1 AND status = 'running' AND replica = $2 AND attempts = $3 "
            "FOR SHARE",
            execution_id,
            self._replica,
            attempt,
        )
        return found is not None

    async def recover(self, now: float, live_seconds: float) -> list[str]:
        async def recover(db: asyncpg.Connection) -> list[str]:
            # Every row names its replica from creation; a row without one predates that and is
            # taken as gone only once it is older than a replica's heartbeat allows. A leased row is
            # `take_over`'s; the heartbeats are judged on the database's clock.
            rows = await db.fetch(
                f"SELECT id, status FROM executions WHERE status IN {LIVE_SQL} AND NOT EXISTS ({LEASED}) AND ("  # noqa: S608
                "(replica <> $1 AND replica NOT IN (SELECT id FROM replicas "
                "WHERE seen_at >= extract(epoch FROM clock_timestamp()) - $3)) "
                "OR (replica IS NULL AND created_at < $2)) FOR UPDATE",
                self._replica,
                now - live_seconds,
                live_seconds,
            )
            for row in rows:
                if row[1] == "running":
                    await db.execute(
                        "UPDATE executions SET status = 'failed', error = $2, progress_message = $4, updated_at = $3, "
                        "finished_at = $3 WHERE id = $1",
                        row[0],
                        orjson.dumps(ORPHANED),
                        now,
                        failed_message(ORPHANED),
                    )
                else:
                    await db.execute(
                        CANCEL.format(where="id = $1"), row[0], "cancelled: the replica that accepted it stopped", now
                    )
            return [row[0] for row in rows]

        return await self._engine.run(recover)

    async def renew(self, lease_seconds: float, now: float) -> int:
        return await postgres_leases.renew(self._engine, self._replica, lease_seconds)

    async def take_over(self, now: float, *, lease_seconds: float, max_takeovers: int) -> Takeover:
        return await postgres_leases.take_over(
            self._engine, self._replica, now, ORPHANED, lease_seconds=lease_seconds, max_takeovers=max_takeovers
        )

    async def fail_abandoned(self, keep: Collection[str], before: float, now: float) -> list[str]:
        async def fail(db: asyncpg.Connection) -> list[str]:
            lost = await db.fetch(
                "UPDATE executions SET status = 'failed', error = $4, progress_message = $6, updated_at = $5, "
                "finished_at = $5 WHERE status = 'running' AND replica = $1 AND updated_at < $2 "
                "AND NOT (id = ANY($3::text[])) RETURNING id",
                self._replica,
                before,
                list(keep),
                orjson.dumps(ABANDONED),
                now,
                failed_message(ABANDONED),
            )
            unstarted = await db.fetch(
                "UPDATE executions SET status = 'cancelled', progress_message = $3, updated_at = $4, "
                "finished_at = $4, payload = NULL WHERE status = 'pending' AND replica = $1 AND updated_at < $2 "
                "RETURNING id",
                self._replica,
                before,
                NEVER_STARTED,
                now,
            )
            return [row[0] for row in [*lost, *unstarted]]

        return await self._engine.run(fail)

    async def purge(self, before: float) -> int:
        async def purge(db: asyncpg.Connection) -> int:
            ended = f"status NOT IN {LIVE_SQL} AND finished_at < $1"
            await db.execute(
                f"DELETE FROM execution_parts WHERE execution_id IN (SELECT id FROM executions WHERE {ended})",  # noqa: S608
                before,
            )
            outcome = await db.execute(f"DELETE FROM executions WHERE {ended}", before)  # noqa: S608
            return int(outcome.rsplit(" ", 1)[-1])

        return await self._engine.run(purge)
