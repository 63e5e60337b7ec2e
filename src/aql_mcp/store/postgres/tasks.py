"""`TaskStore` on PostgreSQL: each method one transaction; `tasks/update` locks the row it changes."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import asyncpg
import orjson

from aql_mcp.store.postgres.engine import PostgresEngine
from aql_mcp.store.tasks import (
    LIVE,
    Answered,
    TaskRecord,
    TaskState,
    TaskStatus,
    json_or_none,
    task_record,
    task_row,
)

COLUMNS = (
    "id, owner, tool, status, created_at, updated_at, expires_at, ttl_ms, poll_ms, status_message, "
    "input_requests, answers, result, error"
)
SELECT = f"SELECT {COLUMNS} FROM tasks"  # noqa: S608 - constant columns
LIVE_SQL = "('working', 'input_required')"
# A task that ended asks nothing any more.
NONE_PENDING = b"{}"
# Creations by one owner take turns (transaction-scoped advisory lock on the owner), so two replicas
# racing for the owner's last slot cannot both count below the cap.
OWNER_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended('aql_mcp.tasks:' || $1, 0))"
# Leases are the database's clock, never a replica's own: a replica whose clock is off must neither
# lose its leases nor take another's early.
DB_NOW = "extract(epoch FROM clock_timestamp())"
# The replica's one poll: renew the leases of its live tasks (when `$3` is given) and read every
# task's status, with the answers of those waiting for them. The SELECT sees the rows as the
# statement started: the renewal changes only `lease_until`, which it does not read.
POLL = (
    "WITH renewed AS (UPDATE task_leases l SET lease_until = " + DB_NOW + " + $3 FROM tasks t "  # noqa: S608
    "WHERE $3::double precision IS NOT NULL AND l.task_id = ANY($1::text[]) AND l.replica = $4 "
    f"AND t.id = l.task_id AND t.status IN {LIVE_SQL}) "
    "SELECT id, status, CASE WHEN id = ANY($2::text[]) THEN answers END, status_message FROM tasks "
    "WHERE id = ANY($1::text[])"
)


class PostgresTaskStore:
    def __init__(self, engine: PostgresEngine) -> None:
        self._engine = engine

    @property
    def replica(self) -> str:
        return self._engine.replica

    async def create_task(
        self,
        record: TaskRecord,
        *,
        max_live_per_owner: int,
        max_stored_per_owner: int,
        now: float,
        lease_seconds: float | None = None,
    ) -> bool:
        async def admit(db: asyncpg.Connection) -> bool:
            await db.execute("DELETE FROM tasks WHERE expires_at < $1", now)
            await db.execute(OWNER_LOCK, record.owner)
            counts = await db.fetchrow(
                f"SELECT count(*) FILTER (WHERE status IN {LIVE_SQL}), count(*) FROM tasks WHERE owner = $1",  # noqa: S608
                record.owner,
            )
            if counts[0] >= max_live_per_owner or counts[1] >= max_stored_per_owner:
                return False
            await db.execute(
                f"INSERT INTO tasks ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)",  # noqa: S608
                *task_row(record),
            )
            if lease_seconds is not None:
                await db.execute(
                    f"INSERT INTO task_leases VALUES ($1, $2, {DB_NOW} + $3)",  # noqa: S608
                    record.id,
                    self._engine.replica,
                    lease_seconds,
                )
            return True

        return await self._engine.run(admit)

    async def get_task(self, task_id: str, owner: str, now: float) -> TaskRecord | None:
        row = await self._engine.fetchrow(
            f"{SELECT} WHERE id = $1 AND owner = $2 AND expires_at >= $3", task_id, owner, now
        )
        return task_record(row) if row else None

    async def load_task(self, task_id: str) -> TaskRecord | None:
        row = await self._engine.fetchrow(f"{SELECT} WHERE id = $1", task_id)
        return task_record(row) if row else None

    async def park_task(self, task_id: str, requests: dict[str, Any], now: float) -> bool:
        status = await self._engine.execute(
            "UPDATE tasks SET status = 'input_required', input_requests = $2, updated_at = $3 "  # noqa: S608
            f"WHERE id = $1 AND status IN {LIVE_SQL}",
            task_id,
            orjson.dumps(requests),
            now,
        )
        return bool(status == "UPDATE 1")

    async def answer_task(self, task_id: str, owner: str, responses: dict[str, Any], now: float) -> Answered:
        async def answer(db: asyncpg.Connection) -> Answered:
            row = await db.fetchrow(
                "SELECT status, input_requests, answers FROM tasks "
                "WHERE id = $1 AND owner = $2 AND expires_at >= $3 FOR UPDATE",
                task_id,
                owner,
                now,
            )
            if row is None:
                return "unknown"
            if row[0] != "input_required":
                return "ignored"
            pending, answers = orjson.loads(row[1]), orjson.loads(row[2])
            taken = [key for key in responses if key in pending]
            if not taken:
                return "ignored"
            for key in taken:
                answers[key] = responses[key]
                del pending[key]
            await db.execute(
                "UPDATE tasks SET status = $2, input_requests = $3, answers = $4, updated_at = $5 WHERE id = $1",
                task_id,
                "input_required" if pending else "working",
                orjson.dumps(pending),
                orjson.dumps(answers),
                now,
            )
            return "stored"

        return await self._engine.run(answer)

    async def finish_task(
        self,
        task_id: str,
        status: TaskStatus,
        now: float,
        *,
        result: dict[str, Any] | None = None,
        error: dict[str, Any] | None = None,
        message: str | None = None,
    ) -> bool:
        outcome = await self._engine.execute(
            "UPDATE tasks SET status = $2, result = $3, error = $4, status_message = $5, input_requests = $6, "  # noqa: S608
            f"updated_at = $7 WHERE id = $1 AND status IN {LIVE_SQL}",
            task_id,
            status,
            json_or_none(result),
            json_or_none(error),
            message,
            NONE_PENDING,
            now,
        )
        return bool(outcome == "UPDATE 1")

    async def cancel_task(self, task_id: str, owner: str, now: float) -> bool:
        async def cancel(db: asyncpg.Connection) -> bool:
            found = await db.fetchval(
                "SELECT status FROM tasks WHERE id = $1 AND owner = $2 AND expires_at >= $3 FOR UPDATE",
                task_id,
                owner,
                now,
            )
            if found is None:
                return False
            if found in LIVE:
                await db.execute(
                    "UPDATE tasks SET status = 'cancelled', input_requests = $2, updated_at = $3 WHERE id = $1",
                    task_id,
                    NONE_PENDING,
                    now,
                )
            return True

        return await self._engine.run(cancel)

    async def poll_tasks(
        self, task_ids: Collection[str], *, answers_for: Collection[str], lease_seconds: float | None, now: float
    ) -> dict[str, TaskState]:
        if not task_ids:
            return {}
        rows = await self._engine.fetch(POLL, list(task_ids), list(answers_for), lease_seconds, self._engine.replica)
        return {row[0]: TaskState(row[1], None if row[2] is None else orjson.loads(row[2]), row[3]) for row in rows}

    async def take_over_tasks(self, error: dict[str, Any], message: str, now: float) -> list[tuple[str, str]]:
        rows = await self._engine.fetch(
            "UPDATE tasks SET status = 'failed', error = $1, status_message = $2, input_requests = $3, "  # noqa: S608
            f"updated_at = $4 WHERE status IN {LIVE_SQL} "
            f"AND id IN (SELECT task_id FROM task_leases WHERE lease_until < {DB_NOW}) RETURNING id, owner",
            orjson.dumps(error),
            message,
            NONE_PENDING,
            now,
        )
        return [(row[0], row[1]) for row in rows]
