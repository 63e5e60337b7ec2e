"""Execution leases on PostgreSQL (plugins/executions/store.py, `renew` and `take_over`).

Lease ends are the database's clock, never a replica's own: a replica whose clock is minutes off
neither loses its leases nor takes another's early. Rows are claimed under `FOR UPDATE SKIP
LOCKED`, so replicas taking over at the same moment split the rows instead of waiting on each other,
and a row is claimed once.
"""

from __future__ import annotations

import asyncpg
import orjson

from aql_mcp.plugin import PostgresEngine
from aql_mcp.plugins.executions.store import (
    COLUMNS,
    RUNNING_MESSAGE_SQL,
    ExecutionRecord,
    Takeover,
    execution_record,
    failed_message,
)

LIVE_SQL = "('pending', 'running')"
DB_NOW = "extract(epoch FROM clock_timestamp())"
# What a takeover leaves in the progress message of a pending execution it cancels.
NOT_STARTED = "cancelled: the replica that accepted it stopped"


async def renew(engine: PostgresEngine, replica: str, lease_seconds: float) -> int:
    outcome = await engine.execute(
        "INSERT INTO execution_leases (execution_id, attempt, lease_until, takeovers) "  # noqa: S608
        f"SELECT id, attempts, {DB_NOW} + $2, 0 FROM executions WHERE replica = $1 AND status IN {LIVE_SQL} "
        "ON CONFLICT (execution_id) DO UPDATE SET attempt = excluded.attempt, "
        "lease_until = excluded.lease_until",
        replica,
        lease_seconds,
    )
    return int(outcome.rsplit(" ", 1)[-1])


async def take_over(
    engine: PostgresEngine,
    replica: str,
    now: float,
    orphaned: dict[str, object],
    *,
    lease_seconds: float,
    max_takeovers: int,
) -> Takeover:
    async def take(db: asyncpg.Connection) -> Takeover:
        found = await db.fetch(
            "SELECT e.id, e.status, l.takeovers FROM executions e JOIN execution_leases l "  # noqa: S608
            f"ON l.execution_id = e.id AND l.attempt = e.attempts WHERE e.status IN {LIVE_SQL} "
            f"AND l.lease_until < {DB_NOW} FOR UPDATE OF e SKIP LOCKED"
        )
        done = Takeover()
        for execution_id, status, takeovers in found:
            if status == "running" and takeovers < max_takeovers:
                done.resumed.append(await _claim(db, execution_id, replica, lease_seconds, now))
                continue
            if status == "running":
                await db.execute(
                    "UPDATE executions SET status = 'failed', error = $2, progress_message = $3, updated_at = $4, "
                    "finished_at = $4 WHERE id = $1",
                    execution_id,
                    orjson.dumps(orphaned),
                    failed_message(orphaned),
                    now,
                )
            else:
                await db.execute(
                    "UPDATE executions SET status = 'cancelled', progress_message = $2, updated_at = $3, "
                    "finished_at = $3, payload = NULL WHERE id = $1",
                    execution_id,
                    NOT_STARTED,
                    now,
                )
            done.ended.append(execution_id)
        return done

    return await engine.run(take)


async def _claim(
    db: asyncpg.Connection, execution_id: str, replica: str, lease_seconds: float, now: float
) -> ExecutionRecord:
    row = await db.fetchrow(
        "UPDATE executions SET replica = $2, attempts = attempts + 1, "  # noqa: S608
        f"progress_message = {RUNNING_MESSAGE_SQL}, updated_at = $3 WHERE id = $1 RETURNING {COLUMNS}",
        execution_id,
        replica,
        now,
    )
    claimed = execution_record(row)
    await db.execute(
        f"UPDATE execution_leases SET attempt = $2, lease_until = {DB_NOW} + $3, takeovers = takeovers + 1 "  # noqa: S608
        "WHERE execution_id = $1",
        execution_id,
        claimed.attempts,
        lease_seconds,
    )
    return claimed
