"""A tenant's usage row on PostgreSQL (records and bytes): the quota taken by a write, the usage given
back by a delete. The row is the lock every write takes last (postgres.py, `create_record`)."""

from __future__ import annotations

import asyncpg

from aql_mcp.plugins.records.store import Quota, QuotaExceeded, over_quota


async def take_quota(db: asyncpg.Connection, tenant: str, records: int, size: int, quota: Quota) -> None:
    """Add to the tenant's usage unless that passes the quota: one conditional UPDATE, which locks the
    row, so a concurrent writer waits and then sees this one's addition."""
    await db.execute("INSERT INTO record_usage VALUES ($1, 0, 0) ON CONFLICT DO NOTHING", tenant)
    taken = await db.fetchval(
        "UPDATE record_usage SET records = records + $2, bytes = bytes + $3 WHERE tenant = $1 "
        "AND ($2 <= 0 OR records + $2 <= $4) AND ($3 <= 0 OR bytes + $3 <= $5) RETURNING records",
        tenant,
        records,
        size,
        quota.max_records,
        quota.max_bytes,
    )
    if taken is None:
        used = await db.fetchrow("SELECT records, bytes FROM record_usage WHERE tenant = $1", tenant)
        raise over_quota((int(used[0]), int(used[1])), records, size, quota) or QuotaExceeded(
            "records", int(used[0]), quota.max_records
        )


async def add_usage(db: asyncpg.Connection, tenant: str, records: int, size: int) -> None:
    """Add to (or, negative, take from) the tenant's usage, with no quota: a delete, or a write whose
    quota was taken already."""
    await db.execute(
        "INSERT INTO record_usage VALUES ($1, $2, $3) ON CONFLICT (tenant) "
        "DO UPDATE SET records = record_usage.records + excluded.records, bytes = record_usage.bytes + excluded.bytes",
        tenant,
        records,
        size,
    )
