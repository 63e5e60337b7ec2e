"""Declared indexes on PostgreSQL (plugins/records/indexes.py; docs/store.md, "Indexed fields").

An index is built with `CREATE INDEX CONCURRENTLY` on a connection of its own, outside any
transaction (`PostgresEngine.maintain`): writes and reads of the records table go on while it builds.
A concurrent build that fails (cancelled, the connection lost, the replica stopped) leaves an
INVALID index behind, which the planner never uses and every write still maintains: the next build
of that index finds it (`pg_index.indisvalid`), drops it concurrently and builds it again. One build
per index at a time, across replicas: the builder holds a session advisory lock named after the
index, and a listing of states reads an index nobody holds that lock for as `invalid`, not `building`.
"""

from __future__ import annotations

import time

import asyncpg

from aql_mcp.plugin import PostgresEngine
from aql_mcp.plugins.records.indexes import from_json, index_of
from aql_mcp.plugins.records.listing import PREFIX, Index
from aql_mcp.plugins.records.postgres_dialect import PostgresDialect
from aql_mcp.plugins.records.store import AlreadyExists, IndexMissing, Missing, QuotaExceeded, timestamp

DIALECT = PostgresDialect()
# The advisory lock of one index's build (session-level on the builder's own connection).
LOCK = "hashtext('records-index:' || $1)"
VALIDITY = (
    "SELECT c.relname, i.indisvalid AND i.indisready FROM pg_index AS i "
    "JOIN pg_class AS c ON c.oid = i.indexrelid WHERE i.indrelid = 'records'::regclass AND c.relname LIKE $1"
)
DECLARED = "SELECT DISTINCT field, type FROM record_indexes"
# A collection's declarations as one JSON text, in field order (the collection's read selects it).
OF_COLLECTION = (
    "(SELECT jsonb_agg(jsonb_build_array(i.field, i.type) ORDER BY i.field, i.type)::text FROM record_indexes AS i "
    "WHERE i.tenant = record_collections.tenant AND i.collection = record_collections.name)"
)


async def declare(
    db: asyncpg.Connection, tenant: str, collection: str, new: tuple[Index, ...], limit: int, now: str
) -> tuple[Index, ...]:
    """Add `new` to the collection's declared indexes inside the caller's transaction, the tenant's
    count checked against `limit` under a lock of the tenant's, so two declarations cannot both pass;
    the collection's row locked, so a deletion of it waits."""
    await db.execute("SELECT pg_advisory_xact_lock(hashtext('records-indexes:' || $1))", tenant)
    await _lock_collection(db, tenant, collection)
    current = await _declared(db, tenant, collection)
    for index in new:
        if index in current:
            raise AlreadyExists(index.field)
    used = int(await db.fetchval("SELECT count(*) FROM record_indexes WHERE tenant = $1", tenant))
    if new and used + len(new) > limit:
        raise QuotaExceeded("indexes", used, limit)
    await db.executemany(
        "INSERT INTO record_indexes VALUES ($1, $2, $3, $4, $5)",
        [(tenant, collection, index.field, index.type, now) for index in new],
    )
    return await _declared(db, tenant, collection)


async def undeclare(db: asyncpg.Connection, tenant: str, collection: str, index: Index) -> tuple[Index, ...]:
    await _lock_collection(db, tenant, collection)
    gone = await db.execute(
        "DELETE FROM record_indexes WHERE tenant = $1 AND collection = $2 AND field = $3 AND type = $4",
        tenant,
        collection,
        index.field,
        index.type,
    )
    if gone != "DELETE 1":
        raise IndexMissing(index.field)
    return await _declared(db, tenant, collection)


async def _lock_collection(db: asyncpg.Connection, tenant: str, collection: str) -> None:
    found = await db.fetchval(
        "SELECT 1 FROM record_collections WHERE tenant = $1 AND name = $2 FOR UPDATE", tenant, collection
    )
    if found is None:
        raise Missing(collection)


async def _declared(db: asyncpg.Connection, tenant: str, collection: str) -> tuple[Index, ...]:
    rows = await db.fetch(
        "SELECT field, type FROM record_indexes WHERE tenant = $1 AND collection = $2 ORDER BY field, type",
        tenant,
        collection,
    )
    return from_json([tuple(row) for row in rows])


def create_sql(index: Index) -> str:
    expression = DIALECT.index_expression(index)
    return f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {index.name} ON records (tenant, collection, {expression}, pos)"


async def build(db: asyncpg.Connection, index: Index) -> None:
    """Build `index` unless a valid one exists, under its build lock; an INVALID one is dropped first."""
    await db.execute(f"SELECT pg_advisory_lock({LOCK})", index.name)
    try:
        found = {row[0]: row[1] for row in await db.fetch(VALIDITY, index.name)}
        if found.get(index.name) is False:
            await db.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {index.name}")
        if found.get(index.name) is not True:
            await db.execute(create_sql(index))
    finally:
        if not db.is_closed():
            await db.execute(f"SELECT pg_advisory_unlock({LOCK})", index.name)


async def drop_undeclared(db: asyncpg.Connection, name: str) -> bool:
    """Drop index `name` unless a collection declares it, under its build lock (a build of it waits)."""
    await db.execute(f"SELECT pg_advisory_lock({LOCK})", name)
    try:
        declared = {index_of(field, kind).name for field, kind in await db.fetch(DECLARED)}
        if name in declared or not await db.fetch(VALIDITY, name):
            return False
        await db.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
        return True
    finally:
        if not db.is_closed():
            await db.execute(f"SELECT pg_advisory_unlock({LOCK})", name)


class PostgresIndexes:
    """The index half of `PostgresRecordStore` (postgres.py)."""

    _engine: PostgresEngine

    async def add_index(self, tenant: str, collection: str, index: Index, max_indexes: int) -> tuple[Index, ...]:
        stamp = timestamp(time.time())

        async def add(db: asyncpg.Connection) -> tuple[Index, ...]:
            return await declare(db, tenant, collection, (index,), max_indexes, stamp)

        return await self._engine.run(add, tenant=tenant)

    async def remove_index(self, tenant: str, collection: str, index: Index) -> tuple[Index, ...]:
        async def remove(db: asyncpg.Connection) -> tuple[Index, ...]:
            return await undeclare(db, tenant, collection, index)

        return await self._engine.run(remove, tenant=tenant)

    async def build_index(self, index: Index) -> None:
        async def work(db: asyncpg.Connection) -> None:
            await build(db, index)

        await self._engine.maintain(work)

    async def drop_unused_index(self, index: Index) -> bool:
        async def work(db: asyncpg.Connection) -> bool:
            return await drop_undeclared(db, index.name)

        return await self._engine.maintain(work)

    async def index_states(self, indexes: tuple[Index, ...]) -> dict[Index, str]:
        async def read(db: asyncpg.Connection) -> dict[Index, str]:
            found = {row[0]: row[1] for row in await db.fetch(VALIDITY, _pattern())}
            states: dict[Index, str] = {}
            for index in indexes:
                # A build holds the index's lock; taking it here (until this read commits) says none runs.
                idle = await db.fetchval(f"SELECT pg_try_advisory_xact_lock({LOCK})", index.name)
                valid = found.get(index.name)
                states[index] = _state(valid, building=not idle)
            return states

        return await self._engine.run(read)

    async def reconcile_indexes(self) -> int:
        async def read(db: asyncpg.Connection) -> tuple[set[Index], dict[str, bool]]:
            declared = {index_of(field, kind) for field, kind in await db.fetch(DECLARED)}
            return declared, {row[0]: row[1] for row in await db.fetch(VALIDITY, _pattern())}

        declared, found = await self._engine.run(read)
        to_build = sorted((index for index in declared if found.get(index.name) is not True), key=lambda i: i.name)
        to_drop = sorted(set(found) - {index.name for index in declared})
        if not to_build and not to_drop:
            return 0

        async def work(db: asyncpg.Connection) -> int:
            for index in to_build:
                await build(db, index)
            return len(to_build) + sum([await drop_undeclared(db, name) for name in to_drop])

        return await self._engine.maintain(work)


def _state(valid: bool | None, *, building: bool) -> str:
    if valid:
        return "ready"
    if building:
        return "building"
    return "missing" if valid is None else "invalid"


def _pattern() -> str:
    return PREFIX.replace("_", "\\_") + "%"
