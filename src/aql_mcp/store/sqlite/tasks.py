"""`TaskStore` on SQLite: each method one transaction on the writer (or one read)."""

from __future__ import annotations

import secrets
import sqlite3
from collections.abc import Collection
from typing import Any

import orjson

from aql_mcp.store.sqlite.engine import SqliteEngine
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
INSERT = f"INSERT INTO tasks ({COLUMNS}) VALUES ({', '.join('?' * 14)})"  # noqa: S608 - constant columns
LIVE_SQL = "('working', 'input_required')"
# A task that ended asks nothing any more.
NONE_PENDING = b"{}"


class SqliteTaskStore:
    """`TaskStore` on the service's SQLite engine. One process owns the file, so its clock is the
    lease's; a task leased under another name was left by an earlier run of the service."""

    def __init__(self, engine: SqliteEngine) -> None:
        self._engine = engine
        self._replica = "sqlite-" + secrets.token_hex(6)

    @property
    def replica(self) -> str:
        return self._replica

    async def create_task(
        self,
        record: TaskRecord,
        *,
        max_live_per_owner: int,
        max_stored_per_owner: int,
        now: float,
        lease_seconds: float | None = None,
    ) -> bool:

        def admit(db: sqlite3.Connection) -> bool:
            db.execute("DELETE FROM tasks WHERE expires_at < ?", (now,))
            live, stored = db.execute(
                f"SELECT coalesce(sum(status IN {LIVE_SQL}), 0), count(*) FROM tasks WHERE owner = ?",  # noqa: S608
                (record.owner,),
            ).fetchone()
            if live >= max_live_per_owner or stored >= max_stored_per_owner:
                return False
            db.execute(INSERT, task_row(record))
            if lease_seconds is not None:
                db.execute("INSERT INTO task_leases VALUES (?, ?, ?)", (record.id, self._replica, now + lease_seconds))
            return True

        return await self._engine.write(admit)

    async def get_task(self, task_id: str, owner: str, now: float) -> TaskRecord | None:
        row = await self._engine.read(
            lambda db: db.execute(
                f"{SELECT} WHERE id = ? AND owner = ? AND expires_at >= ?", (task_id, owner, now)
            ).fetchone()
        )
        return task_record(row) if row else None

    async def load_task(self, task_id: str) -> TaskRecord | None:
        row = await self._engine.read(lambda db: db.execute(f"{SELECT} WHERE id = ?", (task_id,)).fetchone())
        return task_record(row) if row else None

    async def park_task(self, task_id: str, requests: dict[str, Any], now: float) -> bool:
        changed = await self._engine.write(
            lambda db: (
                db.execute(
                    "UPDATE tasks SET status = 'input_required', input_requests = ?, updated_at = ? "  # noqa: S608
                    f"WHERE id = ? AND status IN {LIVE_SQL}",
                    (orjson.dumps(requests), now, task_id),
                ).rowcount
            )
        )
        return bool(changed == 1)

    async def answer_task(self, task_id: str, owner: str, responses: dict[str, Any], now: float) -> Answered:
        def answer(db: sqlite3.Connection) -> Answered:
            row = db.execute(
                "SELECT status, input_requests, answers FROM tasks WHERE id = ? AND owner = ? AND expires_at >= ?",
                (task_id, owner, now),
            ).fetchone()
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
            status = "input_required" if pending else "working"
            db.execute(
                "UPDATE tasks SET status = ?, input_requests = ?, answers = ?, updated_at = ? WHERE id = ?",
                (status, orjson.dumps(pending), orjson.dumps(answers), now, task_id),
            )
            return "stored"

        return await self._engine.write(answer)

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
        values = (status, json_or_none(result), json_or_none(error), message, NONE_PENDING, now, task_id)
        changed = await self._engine.write(
            lambda db: (
                db.execute(
                    "UPDATE tasks SET status = ?, result = ?, error = ?, status_message = ?, input_requests = ?, "  # noqa: S608
                    f"updated_at = ? WHERE id = ? AND status IN {LIVE_SQL}",
                    values,
                ).rowcount
            )
        )
        return bool(changed == 1)

    async def cancel_task(self, task_id: str, owner: str, now: float) -> bool:
        def cancel(db: sqlite3.Connection) -> bool:
            found = db.execute(
                "SELECT status FROM tasks WHERE id = ? AND owner = ? AND expires_at >= ?", (task_id, owner, now)
            ).fetchone()
            if found is None:
                return False
            if found[0] in LIVE:
                db.execute(
                    "UPDATE tasks SET status = 'cancelled', input_requests = ?, updated_at = ? WHERE id = ?",
                    (NONE_PENDING, now, task_id),
                )
            return True

        return await self._engine.write(cancel)

    async def poll_tasks(
        self, task_ids: Collection[str], *, answers_for: Collection[str], lease_seconds: float | None, now: float
    ) -> dict[str, TaskState]:
        ids, asked = list(task_ids), set(answers_for)
        if not ids:
            return {}
        marks = ", ".join("?" * len(ids))

        def poll(db: sqlite3.Connection) -> list[Any]:
            if lease_seconds is not None:
                db.execute(
                    f"UPDATE task_leases SET lease_until = ? WHERE task_id IN ({marks}) AND replica = ? "  # noqa: S608
                    f"AND task_id IN (SELECT id FROM tasks WHERE status IN {LIVE_SQL})",
                    (now + lease_seconds, *ids, self._replica),
                )
            return db.execute(
                f"SELECT id, status, answers, status_message FROM tasks WHERE id IN ({marks})",  # noqa: S608
                ids,
            ).fetchall()

        rows = await (self._engine.write(poll) if lease_seconds is not None else self._engine.read(poll))
        return {row[0]: TaskState(row[1], orjson.loads(row[2]) if row[0] in asked else None, row[3]) for row in rows}

    async def take_over_tasks(self, error: dict[str, Any], message: str, now: float) -> list[tuple[str, str]]:
        def take(db: sqlite3.Connection) -> list[tuple[str, str]]:
            rows = db.execute(
                "UPDATE tasks SET status = 'failed', error = ?, status_message = ?, input_requests = ?, "  # noqa: S608
                f"updated_at = ? WHERE status IN {LIVE_SQL} "
                "AND id IN (SELECT task_id FROM task_leases WHERE lease_until < ?) RETURNING id, owner",
                (orjson.dumps(error), message, NONE_PENDING, now, now),
            ).fetchall()
            return [(row[0], row[1]) for row in rows]

        return await self._engine.write(take)
