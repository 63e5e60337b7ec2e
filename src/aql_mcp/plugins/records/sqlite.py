"""`RecordStore` on SQLite: writes on the writer thread in one IMMEDIATE transaction each, listings
compiled to JSON1 SQL and run on a reader thread, or on a scan thread when no index answers them
(`store.scan_concurrency`)."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from typing import Any

import orjson

from aql_mcp.plugin import SqliteEngine, TurnTimedOut
from aql_mcp.plugins.records.compiler import beyond_query, page_query
from aql_mcp.plugins.records.indexes import from_json, in_order, scans
from aql_mcp.plugins.records.listing import Index, Key, Listing
from aql_mcp.plugins.records.sqlite_dialect import SqliteDialect
from aql_mcp.plugins.records.sqlite_indexes import OF_COLLECTION, SqliteIndexes, declare
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
    over_quota,
    replayed,
    timestamp,
    window_page,
)

COLUMNS = "collection, id, data, etag, created_at, updated_at, pos"
COLLECTION = f"name, description, fields, created_at, record_count, {OF_COLLECTION}"
DIALECT = SqliteDialect()
# How many SQLite virtual machine steps pass between two looks at a listing's clock.
CLOCK_STEPS = 1_000


class SqliteRecordStore(SqliteIndexes):
    """`RecordStore` on the service's SQLite engine (its declared indexes: sqlite_indexes.py)."""

    def __init__(
        self, engine: SqliteEngine, *, scan_rows: int = SCAN_ROWS, listing_seconds: float = LISTING_SECONDS
    ) -> None:
        self._engine = engine
        self._building = set()
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
        blob = orjson.dumps(list(fields)) if fields is not None else None

        def create(db: sqlite3.Connection) -> None:
            inserted = db.execute(
                "INSERT INTO record_collections (tenant, name, description, fields, created_at) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (tenant, name, description, blob, now),
            ).rowcount
            if inserted != 1:
                raise AlreadyExists(name)
            if indexes:
                declare(db, tenant, name, indexes, max_indexes, now)

        await self._engine.write(create)
        return StoredCollection(name, description, fields, now, indexes=in_order(indexes))

    async def get_collection(self, tenant: str, name: str) -> StoredCollection | None:
        row = await self._engine.read(
            lambda db: db.execute(
                f"SELECT {COLLECTION} FROM record_collections WHERE tenant = ? AND name = ?",  # noqa: S608
                (tenant, name),
            ).fetchone(),
            tenant=tenant,
        )
        return _collection(row) if row else None

    async def list_collections(
        self, tenant: str, *, size: int, forward: bool = True, cursor: str | None = None
    ) -> CollectionPage:
        # Keyset over the primary key (tenant, name): each page reads `size + 1` rows, never the whole list.
        beyond, behind, order = (">", "<=", "ASC") if forward else ("<", ">=", "DESC")
        after = f"AND name {beyond} ? " if cursor is not None else ""
        query = (
            f"SELECT {COLLECTION} FROM record_collections "  # noqa: S608
            f"WHERE tenant = ? {after}ORDER BY name {order} LIMIT ?"
        )
        args = (tenant, cursor, size + 1) if cursor is not None else (tenant, size + 1)

        def read(db: sqlite3.Connection) -> CollectionPage:
            rows = [_collection(row) for row in db.execute(query, args).fetchall()]
            back = cursor is not None and bool(
                db.execute(
                    f"SELECT EXISTS (SELECT 1 FROM record_collections WHERE tenant = ? AND name {behind} ?)",  # noqa: S608
                    (tenant, cursor),
                ).fetchone()[0]
            )
            total = db.execute("SELECT count(*) FROM record_collections WHERE tenant = ?", (tenant,)).fetchone()[0]
            return collection_page(rows, size, forward=forward, behind=back, total=int(total))

        return await self._engine.read(read, tenant=tenant)

    async def delete_collection(self, tenant: str, name: str) -> int:
        def delete(db: sqlite3.Connection) -> int:
            found = db.execute(
                "SELECT record_count FROM record_collections WHERE tenant = ? AND name = ?", (tenant, name)
            ).fetchone()
            if found is None:
                raise Missing(name)
            size = db.execute(
                "SELECT coalesce(sum(size), 0) FROM records WHERE tenant = ? AND collection = ?", (tenant, name)
            ).fetchone()[0]
            db.execute("DELETE FROM records WHERE tenant = ? AND collection = ?", (tenant, name))
            db.execute("DELETE FROM record_indexes WHERE tenant = ? AND collection = ?", (tenant, name))
            db.execute("DELETE FROM record_collections WHERE tenant = ? AND name = ?", (tenant, name))
            _add_usage(db, tenant, -found[0], -size)
            return int(found[0])

        return await self._engine.write(delete)

    async def create_record(
        self, tenant: str, record: NewRecord, quota: Quota, idempotency: Idempotency | None
    ) -> tuple[StoredRecord, bool]:
        """The new record, or the first one for a repeated idempotency key (then True)."""
        body = orjson.dumps(record.data)

        def create(db: sqlite3.Connection) -> tuple[StoredRecord, bool]:
            if idempotency is not None:
                row = db.execute(
                    "SELECT request_hash, response FROM record_idempotency WHERE tenant = ? AND key = ?",
                    (tenant, idempotency.key),
                ).fetchone()
                if row is not None:
                    if row[0] != idempotency.request_hash:
                        raise KeyReused(idempotency.key)
                    return replayed(row[1]), True
            exceeded = over_quota(_usage(db, tenant), 1, len(body), quota)
            if exceeded is not None:
                raise exceeded
            # The collection's own counter gives the position; no counter shared by tenants shows.
            counted = db.execute(
                "UPDATE record_collections SET next_pos = next_pos + 1, record_count = record_count + 1 "
                "WHERE tenant = ? AND name = ? RETURNING next_pos",
                (tenant, record.collection),
            ).fetchone()
            if counted is None:
                raise Missing(record.collection)
            db.execute(
                "INSERT INTO records (tenant, collection, id, data, size, etag, created_at, updated_at, pos) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    tenant,
                    record.collection,
                    record.id,
                    body,
                    len(body),
                    record.etag,
                    record.now,
                    record.now,
                    counted[0],
                ),
            )
            _add_usage(db, tenant, 1, len(body))
            stored = StoredRecord(
                record.collection, record.id, record.data, record.etag, record.now, record.now, int(counted[0])
            )
            if idempotency is not None:
                db.execute(
                    "INSERT INTO record_idempotency VALUES (?, ?, ?, ?, ?)",
                    (
                        tenant,
                        idempotency.key,
                        idempotency.request_hash,
                        orjson.dumps(first_response(stored)),
                        record.now,
                    ),
                )
            return stored, False

        return await self._engine.write(create)

    async def create_records(self, tenant: str, collection: str, records: list[NewRecord], quota: Quota) -> int:
        return await self._engine.write(lambda db: insert_records(db, tenant, collection, records, quota))

    async def get_record(self, tenant: str, collection: str, record_id: str) -> StoredRecord | None:
        row = await self._engine.read(
            lambda db: db.execute(
                f"SELECT {COLUMNS} FROM records WHERE tenant = ? AND collection = ? AND id = ?",  # noqa: S608
                (tenant, collection, record_id),
            ).fetchone(),
            tenant=tenant,
        )
        return _record(row) if row else None

    async def list_records(self, tenant: str, collection: str, listing: Listing) -> RecordPage:
        page = page_query(listing, DIALECT, COLUMNS, (tenant, collection))
        beyond = beyond_query(listing, DIALECT, (tenant, collection))
        # The listing's time counts from here: a wait for a scan slot spends it too.
        deadline = None if listing.is_plain else time.monotonic() + self.listing_seconds

        def read(db: sqlite3.Connection) -> RecordPage:
            found = db.execute(
                "SELECT record_count FROM record_collections WHERE tenant = ? AND name = ?", (tenant, collection)
            ).fetchone()
            count = int(found[0]) if found else 0
            check_scan(listing, count, self.scan_rows)
            with _clock(db, deadline, self.listing_seconds):
                rows = db.execute(page.sql, page.params).fetchall()
                behind = bool(db.execute(beyond.sql, beyond.params).fetchone()[0]) if beyond else False
            keyed = [(_record(row), Key(row[7], row[8], row[9], row[6])) for row in rows]
            return window_page(keyed, listing, behind=behind, total=count if listing.is_plain else None)

        if not scans(listing):
            return await self._engine.read(read, tenant=tenant)
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
        def update(db: sqlite3.Connection) -> StoredRecord:
            row = db.execute(
                f"SELECT {COLUMNS}, size FROM records WHERE tenant = ? AND collection = ? AND id = ?",  # noqa: S608
                (tenant, collection, record_id),
            ).fetchone()
            if row is None:
                raise Missing(record_id)
            current = _record(row)
            if if_match is not None and if_match != current.etag:
                raise VersionMismatch(current.etag)
            data = change(current.data)
            body = orjson.dumps(data)
            exceeded = over_quota(_usage(db, tenant), 0, len(body) - row[-1], quota)
            if exceeded is not None:
                raise exceeded
            db.execute(
                "UPDATE records SET data = ?, size = ?, etag = ?, updated_at = ? "
                "WHERE tenant = ? AND collection = ? AND id = ?",
                (body, len(body), etag, now, tenant, collection, record_id),
            )
            _add_usage(db, tenant, 0, len(body) - row[-1])
            return StoredRecord(collection, record_id, data, etag, current.created_at, now, current.position)

        return await self._engine.write(update)

    async def delete_record(self, tenant: str, collection: str, record_id: str, *, if_match: str | None) -> None:
        def delete(db: sqlite3.Connection) -> None:
            row = db.execute(
                "SELECT etag, size FROM records WHERE tenant = ? AND collection = ? AND id = ?",
                (tenant, collection, record_id),
            ).fetchone()
            if row is None:
                raise Missing(record_id)
            if if_match is not None and if_match != row[0]:
                raise VersionMismatch(row[0])
            db.execute(
                "DELETE FROM records WHERE tenant = ? AND collection = ? AND id = ?", (tenant, collection, record_id)
            )
            db.execute(
                "UPDATE record_collections SET record_count = record_count - 1 WHERE tenant = ? AND name = ?",
                (tenant, collection),
            )
            _add_usage(db, tenant, -1, -row[1])

        await self._engine.write(delete)

    async def usage(self, tenant: str) -> tuple[int, int]:
        return await self._engine.read(lambda db: _usage(db, tenant), tenant=tenant)

    async def purge_idempotency(self, before: float) -> int:
        cutoff = timestamp(before)
        return await self._engine.write(
            lambda db: int(db.execute("DELETE FROM record_idempotency WHERE created_at < ?", (cutoff,)).rowcount)
        )


def insert_records(db: sqlite3.Connection, tenant: str, collection: str, records: list[NewRecord], quota: Quota) -> int:
    """Insert `records` into the collection inside the caller's transaction, the quota checked for
    all of them at once: all are written or none (a bulk import's batch). Returns how many."""
    if not records:
        return 0
    bodies = [orjson.dumps(record.data) for record in records]
    size = sum(len(body) for body in bodies)
    exceeded = over_quota(_usage(db, tenant), len(records), size, quota)
    if exceeded is not None:
        raise exceeded
    counted = db.execute(
        "UPDATE record_collections SET next_pos = next_pos + ?, record_count = record_count + ? "
        "WHERE tenant = ? AND name = ? RETURNING next_pos",
        (len(records), len(records), tenant, collection),
    ).fetchone()
    if counted is None:
        raise Missing(collection)
    first = int(counted[0]) - len(records) + 1
    db.executemany(
        "INSERT INTO records (tenant, collection, id, data, size, etag, created_at, updated_at, pos) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (tenant, collection, r.id, body, len(body), r.etag, r.now, r.now, first + i)
            for i, (r, body) in enumerate(zip(records, bodies, strict=True))
        ],
    )
    _add_usage(db, tenant, len(records), size)
    return len(records)


def _record(row: tuple[Any, ...]) -> StoredRecord:
    return StoredRecord(row[0], row[1], orjson.loads(row[2]), row[3], row[4], row[5], row[6])


def _collection(row: tuple[Any, ...]) -> StoredCollection:
    fields = tuple(orjson.loads(row[2])) if row[2] is not None else None
    indexes = from_json(orjson.loads(row[5]))
    return StoredCollection(row[0], row[1], fields, row[3], int(row[4]), indexes)


class _clock:
    """A listing's time limit on its connection: past `deadline` (monotonic), SQLite stops the
    statement (a progress handler), and the listing fails with `ListingTimedOut` of its `seconds`;
    None: no limit. A deadline already past fails before any statement runs."""

    def __init__(self, db: sqlite3.Connection, deadline: float | None, seconds: float) -> None:
        self._db, self._deadline, self._seconds = db, deadline, seconds

    def __enter__(self) -> None:
        deadline = self._deadline
        if deadline is None:
            return
        if time.monotonic() > deadline:
            raise ListingTimedOut(self._seconds)
        self._db.set_progress_handler(lambda: time.monotonic() > deadline, CLOCK_STEPS)

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, trace: object) -> None:
        if self._deadline is None:
            return
        self._db.set_progress_handler(None, 0)
        if isinstance(exc, sqlite3.OperationalError) and str(exc) == "interrupted":
            raise ListingTimedOut(self._seconds) from exc


def _usage(db: sqlite3.Connection, tenant: str) -> tuple[int, int]:
    row = db.execute("SELECT records, bytes FROM record_usage WHERE tenant = ?", (tenant,)).fetchone()
    return (int(row[0]), int(row[1])) if row else (0, 0)


def _add_usage(db: sqlite3.Connection, tenant: str, records: int, size: int) -> None:
    db.execute(
        "INSERT INTO record_usage VALUES (?, ?, ?) ON CONFLICT (tenant) "
        "DO UPDATE SET records = records + excluded.records, bytes = bytes + excluded.bytes",
        (tenant, records, size),
    )
