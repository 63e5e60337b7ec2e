"""Execution leases on SQLite (plugins/executions/store.py, `renew` and `take_over`).

One process owns the file, so its clock is the lease's, and `recover` already fails at start what
an earlier run left; a takeover here finds what this run's own workers stopped renewing.
"""

from __future__ import annotations

import sqlite3

import orjson

from aql_mcp.plugin import SqliteEngine
from aql_mcp.plugins.executions.store import (
    COLUMNS,
    RUNNING_MESSAGE_SQL,
    ExecutionRecord,
    Takeover,
    execution_record,
    failed_message,
)

LIVE_SQL = "('pending', 'running')"
# Live executions whose current attempt's lease ran out (a lease of an earlier attempt counts not).
TAKEN = (
    "SELECT e.id, e.status, l.takeovers FROM executions e JOIN execution_leases l "  # noqa: S608
    f"ON l.execution_id = e.id AND l.attempt = e.attempts WHERE e.status IN {LIVE_SQL} AND l.lease_until < ?"
)
# What a takeover leaves in the progress message of a pending execution it cancels.
NOT_STARTED = "cancelled: the replica that accepted it stopped"


async def renew(engine: SqliteEngine, replica: str, lease_seconds: float, now: float) -> int:
    return await engine.write(
        lambda db: int(
            db.execute(
                "INSERT INTO execution_leases (execution_id, attempt, lease_until, takeovers) "  # noqa: S608
                f"SELECT id, attempts, ?, 0 FROM executions WHERE replica = ? AND status IN {LIVE_SQL} "
                "ON CONFLICT (execution_id) DO UPDATE SET attempt = excluded.attempt, "
                "lease_until = excluded.lease_until",
                (now + lease_seconds, replica),
            ).rowcount
        )
    )


async def take_over(
    engine: SqliteEngine,
    replica: str,
    now: float,
    orphaned: dict[str, object],
    *,
    lease_seconds: float,
    max_takeovers: int,
) -> Takeover:
    def take(db: sqlite3.Connection) -> Takeover:
        found = db.execute(TAKEN, (now,)).fetchall()
        done = Takeover()
        for execution_id, status, takeovers in found:
            if status == "running" and takeovers < max_takeovers:
                done.resumed.append(_claim(db, execution_id, replica, now + lease_seconds, now))
                continue
            if status == "running":
                db.execute(
                    "UPDATE executions SET status = 'failed', error = ?, progress_message = ?, updated_at = ?, "
                    "finished_at = ? WHERE id = ?",
                    (orjson.dumps(orphaned), failed_message(orphaned), now, now, execution_id),
                )
            else:
                db.execute(
                    "UPDATE executions SET status = 'cancelled', progress_message = ?, updated_at = ?, "
                    "finished_at = ?, payload = NULL WHERE id = ?",
                    (NOT_STARTED, now, now, execution_id),
                )
            done.ended.append(execution_id)
        return done

    return await engine.write(take)


def _claim(db: sqlite3.Connection, execution_id: str, replica: str, lease_until: float, now: float) -> ExecutionRecord:
    row = db.execute(
        "UPDATE executions SET replica = ?, attempts = attempts + 1, "  # noqa: S608
        f"progress_message = {RUNNING_MESSAGE_SQL}, updated_at = ? WHERE id = ? RETURNING {COLUMNS}",
        (replica, now, execution_id),
    ).fetchone()
    claimed = execution_record(row)
    db.execute(
        "UPDATE execution_leases SET attempt = ?, lease_until = ?, takeovers = takeovers + 1 WHERE execution_id = ?",
        (claimed.attempts, lease_until, execution_id),
    )
    return claimed
