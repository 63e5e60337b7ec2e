"""`RecordStore` on PostgreSQL: each write one transaction with its rows locked, listings compiled
to JSONB SQL. Quotas are a conditional UPDATE of the tenant's usage row, so concurrent writers on
any replica cannot pass them together. A listing no index answers runs on the engine's scan pool
(`store.scan_concurrency`), never on the connections the other calls need."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import asyncpg
import orjson

from aql_mcp.plugin import PostgresEngine, TurnTimedOut
from aql_mcp.plugins.records.compiler import beyond_query, page_query
from aql_mcp.plugins.records.indexes import in_order, scans
from aql_mcp.plugins.records.listing import Index, Listing
from aql_mcp.plugins.records.postgres_dialect import PostgresDialect
from aql_mcp.plugins.records.postgres_indexes import OF_COLLECTION, PostgresIndexes, declare
from aql_mcp.plugins.records.postgres_rows import collection_of, key_of, record_of
from aql_mcp.plugins.records.postgres_usage import add_usage, take_quota
from aql_mcp.plugins.records.store import (
    LISTING_SECONDS,
    SCAN_ROWS,
    AlreadyExists,
    CollectionPage,
    Idempotency,
    KeyReused,
    ListingTimedOut,
    Missing,
    NewRecord,
    Quota,
    RecordPage,
    StoredCollection,
    StoredRecord,
    VersionMismatch,
    check_scan,
    collection_page,
    first_response,
    replayed,
    timestamp,
    window_page,
)

COLUMNS = "collection, id, data::text AS data, etag, created_at, updated_at, pos"
COLLECTION = f"name, description, fields::text, created_at, record_count, {OF_COLLECTION}"
DIALECT = PostgresDialect()


class PostgresRecordStore(PostgresIndexes):
    """`RecordStore` on the service's PostgreSQL engine (its declared indexes: postgres_indexes.py)."""

    def __init__(
        self, engine: PostgresEngine, *, scan_rows: int = SCAN_ROWS, listing_seconds: float = LISTING_SECONDS
    ) -> None:
        self._engine = engine
        self.scan_rows = scan_rows
        self.listing_seconds = listing_seconds

    async def create_collection(
        self,
        tenant: str,
        name: str,
        description: str,
        fields: tuple[str, ...] | None,
        now: str,
        *,
        indexes: tuple[Index, ...] = (),
        max_indexes: int = 0,
    ) -> StoredCollection:
        blob = orjson.dumps(list(fields)).decode() if fields is not None else None

        async def create(db: asyncpg.Connection) -> None:
            inserted = await db.execute(
                "INSERT INTO record_collections (tenant, name, description, fields, created_at) "
                "VALUES ($1, $2, $3, $4::jsonb, $5) ON CONFLICT DO NOTHING",
                tenant,
                name,
                description,
                blob,
                now,
            )
            if inserted != "INSERT 0 1":
                raise AlreadyExists(name)
            if indexes:
                await declare(db, tenant, name, indexes, max_indexes, now)

        await self._engine.run(create, tenant=tenant)
        return StoredCollection(name, description, fields, now, indexes=in_order(indexes))

    async def get_collection(self, tenant: str, name: str) -> StoredCollection | None:
        row = await self._engine.fetchrow(
            f"SELECT {COLLECTION} FROM record_collections WHERE tenant = $1 AND name = $2",  # noqa: S608
            tenant,
            name,
            tenant=tenant,
        )
        return collection_of(row) if row else None

    async def list_collections(
        self, tenant: str, *, size: int, forward: bool = True, cursor: str | None = None
    ) -> CollectionPage:
        # Keyset over the primary key (tenant, name), byte order (`name` is COLLATE "C"), as on SQLite.
        beyond, behind, order = (">", "<=", "ASC") if forward else ("<", ">=", "DESC")
        after = f"AND name {beyond} $3 " if cursor is not None else ""
        query = (
            f"SELECT {COLLECTION} FROM record_collections "  # noqa: S608
            f"WHERE tenant = $1 {after}ORDER BY name {order} LIMIT $2"
        )
        args = (tenant, size + 1, cursor) if cursor is not None else (tenant, size + 1)

        async def read(db: asyncpg.Connection) -> CollectionPage:
            rows = [collection_of(row) for row in await db.fetch(query, *args)]
            back = cursor is not None and bool(
                await db.fetchval(
                    f"SELECT EXISTS (SELECT 1 FROM record_collections WHERE tenant = $1 AND name {behind} $2)",  # noqa: S608
                    tenant,
                    cursor,
                )
            )
            total = await db.fetchval("SELECT count(*) FROM record_collections WHERE tenant = $1", tenant)
            return collection_page(rows, size, forward=forward, behind=back, total=int(total))

        return await self._engine.run(read, tenant=tenant)

    async def delete_collection(self, tenant: str, name: str) -> int:
        async def delete(db: asyncpg.Connection) -> int:
            # The collection row first: a create waiting on it then finds the collection gone.
            found = await db.fetchrow(
                "DELETE FROM record_collections WHERE tenant = $1 AND name = $2 RETURNING record_count", tenant, name
            )
            if found is None:
                raise Missing(name)
            size = await db.fetchval(
                "WITH gone AS (DELETE FROM records WHERE tenant = $1 AND collection = $2 RETURNING size) "
                "SELECT coalesce(sum(size), 0) FROM gone",
                tenant,
                name,
            )
            await db.execute("DELETE FROM record_indexes WHERE tenant = $1 AND collection = $2", tenant, name)
            await add_usage(db, tenant, -int(found[0]), -int(size))
            return int(found[0])

        return await self._engine.run(delete, tenant=tenant)

    async def create_record(
        self, tenant: str, record: NewRecord, quota: Quota, idempotency: Idempotency | None
    ) -> tuple[StoredRecord, bool]:
        body = orjson.dumps(record.data)

        async def create(db: asyncpg.Connection) -> tuple[StoredRecord, bool]:
            if idempotency is not None:
                first = await _claim_key(db, tenant, idempotency, record.now)
                if first is not None:
                    return first, True
            # Every write locks rows in one order, the collection, the record, the usage row, so two
            # writers never wait on each other in a cycle; a refused quota rolls the counter back.
            position = await db.fetchval(
                "UPDATE record_collections SET next_pos = next_pos + 1, record_count = record_count + 1 "
                "WHERE tenant = $1 AND name = $2 RETURNING next_pos",
                tenant,
                record.collection,
            )
            # The quota before the collection's absence, as on SQLite (either rolls the other back).
            await take_quota(db, tenant, 1, len(body), quota)
            if position is None:
                raise Missing(record.collection)
            await db.execute(
                "INSERT INTO records (tenant, collection, pos, id, data, size, etag, created_at, updated_at) "
                "VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7, $8, $8)",
                tenant,
                record.collection,
                position,
                record.id,
                body.decode(),
                len(body),
                record.etag,
                record.now,
            )
            stored = StoredRecord(
                record.collection, record.id, record.data, record.etag, record.now, record.now, int(position)
            )
            if idempotency is not None:
                await db.execute(
                    "UPDATE record_idempotency SET response = $3 WHERE tenant = $1 AND key = $2",
                    tenant,
                    idempotency.key,
                    orjson.dumps(first_response(stored)),
                )
            return stored, False

        return await self._engine.run(create, tenant=tenant)

    async def create_records(self, tenant: str, collection: str, records: list[NewRecord], quota: Quota) -> int:
        async def create(db: asyncpg.Connection) -> int:
            return await insert_records(db, tenant, collection, records, quota)

        return await self._engine.run(create, tenant=tenant)

    async def get_record(self, tenant: str, collection: str, record_id: str) -> StoredRecord | None:
        row = await self._engine.fetchrow(
            f"SELECT {COLUMNS} FROM records WHERE tenant = $1 AND collection = $2 AND id = $3",  # noqa: S608
            tenant,
            collection,
            record_id,
            tenant=tenant,
        )
        return record_of(row) if row else None

    async def list_records(self, tenant: str, collection: str, listing: Listing) -> RecordPage:
        page = page_query(listing, DIALECT, COLUMNS, (tenant, collection))
        beyond = beyond_query(listing, DIALECT, (tenant, collection))
        # The listing's time counts from here: a wait for a scan slot spends it too.
        deadline = time.monotonic() + self.listing_seconds

        async def read(db: asyncpg.Connection) -> RecordPage:
            found = await db.fetchval(
                "SELECT record_count FROM record_collections WHERE tenant = $1 AND name = $2", tenant, collection
            )
            count = int(found or 0)
            check_scan(listing, count, self.scan_rows)
            if not listing.is_plain:
                # Bounded, so scans cannot hold a connection for long (docs/store.md): what is left of its time.
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ListingTimedOut(self.listing_seconds)
                await db.execute(f"SET LOCAL statement_timeout = {max(1, round(left * 1000))}")
            try:
                rows = await db.fetch(page.sql, *page.params)
                behind = bool(await db.fetchval(beyond.sql, *beyond.params)) if beyond else False
            except asyncpg.QueryCanceledError:
                raise ListingTimedOut(self.listing_seconds) from None
            total = count if listing.is_plain else None
            return window_page([(record_of(row), key_of(row)) for row in rows], listing, behind=behind, total=total)

        if not scans(listing):
            return await self._engine.run(read, tenant=tenant)
        try:
            return await self._engine.scan(read, tenant=tenant, wait=self.listing_seconds)
        except TurnTimedOut:
            raise ListingTimedOut(self.listing_seconds) from None

    async def update_record(
        self,
        tenant: str,
        collection: str,
        record_id: str,
        change: Callable[[dict[str, Any]], dict[str, Any]],
        *,
        if_match: str | None,
        etag: str,
        now: str,
        quota: Quota,
    ) -> StoredRecord:
        async def update(db: asyncpg.Connection) -> StoredRecord:
            row = await db.fetchrow(
                f"SELECT {COLUMNS}, size FROM records WHERE tenant = $1 AND collection = $2 AND id = $3 FOR UPDATE",  # noqa: S608
                tenant,
                collection,
                record_id,
            )
            if row is None:
                raise Missing(record_id)
            current = record_of(row)
            if if_match is not None and if_match != current.etag:
                raise VersionMismatch(current.etag)
            data = change(current.data)
            body = orjson.dumps(data)
            grown = len(body) - int(row["size"])
            await take_quota(db, tenant, 0, grown, quota)
            await db.execute(
                "UPDATE records SET data = $4::jsonb, size = $5, etag = $6, updated_at = $7 "
                "WHERE tenant = $1 AND collection = $2 AND id = $3",
                tenant,
                collection,
                record_id,
                body.decode(),
                len(body),
                etag,
                now,
            )
            return StoredRecord(collection, record_id, data, etag, current.created_at, now, current.position)

        return await self._engine.run(update, tenant=tenant)

    async def delete_record(self, tenant: str, collection: str, record_id: str, *, if_match: str | None) -> None:
        async def delete(db: asyncpg.Connection) -> None:
            # The collection, the record, the usage row: the lock order of every write (create_record).
            await db.execute(
                "UPDATE record_collections SET record_count = record_count - 1 WHERE tenant = $1 AND name = $2",
                tenant,
                collection,
            )
            row = await db.fetchrow(
                "SELECT etag, size FROM records WHERE tenant = $1 AND collection = $2 AND id = $3 FOR UPDATE",
                tenant,
                collection,
                record_id,
            )
            if row is None:
                raise Missing(record_id)
            if if_match is not None and if_match != row["etag"]:
                raise VersionMismatch(row["etag"])
            await db.execute(
                "DELETE FROM records WHERE tenant = $1 AND collection = $2 AND id = $3", tenant, collection, record_id
            )
            await add_usage(db, tenant, -1, -int(row["size"]))

        await self._engine.run(delete, tenant=tenant)

    async def usage(self, tenant: str) -> tuple[int, int]:
        row = await self._engine.fetchrow(
            "SELECT records, bytes FROM record_usage WHERE tenant = $1", tenant, tenant=tenant
        )
        return (int(row[0]), int(row[1])) if row else (0, 0)

    async def purge_idempotency(self, before: float) -> int:
        status = await self._engine.execute("DELETE FROM record_idempotency WHERE created_at < $1", timestamp(before))
        return int(status.rsplit(" ", 1)[-1])


async def insert_records(
    db: asyncpg.Connection, tenant: str, collection: str, records: list[NewRecord], quota: Quota
) -> int:
    """Insert `records` into the collection inside the caller's transaction, the quota checked for
    all of them at once: all are written or none (a bulk import's batch). Returns how many."""
    if not records:
        return 0
    bodies = [orjson.dumps(record.data) for record in records]
    size = sum(len(body) for body in bodies)
    # The locking order of create_record: the collection, then the usage row.
    last = await db.fetchval(
        "UPDATE record_collections SET next_pos = next_pos + $3, record_count = record_count + $3 "
        "WHERE tenant = $1 AND name = $2 RETURNING next_pos",
        tenant,
        collection,
        len(records),
    )
    await take_quota(db, tenant, len(records), size, quota)
    if last is None:
        raise Missing(collection)
    first = int(last) - len(records) + 1
    await db.executemany(
        "INSERT INTO records (tenant, collection, pos, id, data, size, etag, created_at, updated_at) "
        "VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7, $8, $8)",
        [
            (tenant, collection, first + i, r.id, body.decode(), len(body), r.etag, r.now)
            for i, (r, body) in enumerate(zip(records, bodies, strict=True))
        ],
    )
    return len(records)


async def _claim_key(db: asyncpg.Connection, tenant: str, idempotency: Idempotency, now: str) -> StoredRecord | None:
    """Claim an idempotency key for this write; None if claimed, else the first write's record.

    The key is claimed first: a retry racing on another replica waits here for this transaction,
    then finds the key taken and replays the first result (a different request under the key is
    `KeyReused`)."""
    claimed = await db.execute(
        "INSERT INTO record_idempotency VALUES ($1, $2, $3, ''::bytea, $4) ON CONFLICT DO NOTHING",
        tenant,
        idempotency.key,
        idempotency.request_hash,
        now,
    )
    if claimed == "INSERT 0 1":
        return None
    row = await db.fetchrow(
        "SELECT request_hash, response FROM record_idempotency WHERE tenant = $1 AND key = $2",
        tenant,
        idempotency.key,
    )
    if row["request_hash"] != idempotency.request_hash:
        raise KeyReused(idempotency.key)
    return replayed(row["response"])
