"""Records data access: named collections of JSON records per tenant (the `records` plugin).

`RecordStore` is the interface the plugin sees; `SqliteRecordStore` implements it on the
connection of the service's SQLite store (`store.records`).
Every write is one `BEGIN IMMEDIATE` transaction, so a quota check, an `_etag` comparison and the
write it guards cannot interleave with another writer. SQLite errors become `StoreError`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

import orjson

from aql_mcp.exceptions import AqlMcpError


def timestamp(epoch: float) -> str:
    """The stored form of a moment: ISO 8601 UTC in milliseconds, which sorts as text (purges compare it)."""
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class SqliteConnection(Protocol):
    """What a facet of the SQLite store needs from it: reads and IMMEDIATE write transactions."""

    def guard(self) -> AbstractContextManager[sqlite3.Connection]: ...
    def transaction(self) -> AbstractContextManager[sqlite3.Connection]: ...


class RecordStoreError(AqlMcpError):
    """A write the store refused for a reason the caller can act on."""


class AlreadyExists(RecordStoreError):
    pass


class Missing(RecordStoreError):
    pass


class VersionMismatch(RecordStoreError):
    def __init__(self, current: str) -> None:
        super().__init__(current)
        self.current = current


class QuotaExceeded(RecordStoreError):
    def __init__(self, metric: str, current: int, limit: int) -> None:
        super().__init__(metric)
        self.metric, self.current, self.limit = metric, current, limit


class KeyReused(RecordStoreError):
    """An idempotency key sent again with other parameters."""


@dataclass(frozen=True, slots=True)
class Quota:
    max_records: int
    max_bytes: int


@dataclass(frozen=True, slots=True)
class StoredCollection:
    name: str
    description: str
    fields: tuple[str, ...] | None
    created_at: str
    record_count: int = 0


@dataclass(frozen=True, slots=True)
class StoredRecord:
    collection: str
    id: str
    data: dict[str, Any]
    etag: str
    created_at: str
    updated_at: str
    seq: int


@dataclass(frozen=True, slots=True)
class NewRecord:
    collection: str
    id: str
    data: dict[str, Any]
    etag: str
    now: str


@dataclass(frozen=True, slots=True)
class SeqWindow:
    """`size` records after `after` (forward) or before `before` (backward), in store order."""

    size: int
    forward: bool
    after: int | None = None
    before: int | None = None


@dataclass(frozen=True, slots=True)
class SeqPage:
    records: list[StoredRecord]
    total: int
    has_previous: bool
    has_next: bool


@dataclass(frozen=True, slots=True)
class Idempotency:
    key: str
    request_hash: str


class RecordStore(Protocol):
    """Collections and records of one tenant at a time; a tenant never reaches another's rows."""

    async def create_collection(
        self, tenant: str, name: str, description: str, fields: tuple[str, ...] | None, now: str
    ) -> StoredCollection: ...
    async def get_collection(self, tenant: str, name: str) -> StoredCollection | None: ...
    async def list_collections(self, tenant: str) -> list[StoredCollection]: ...
    async def delete_collection(self, tenant: str, name: str) -> int: ...
    async def create_record(
        self, tenant: str, record: NewRecord, quota: Quota, idempotency: Idempotency | None
    ) -> tuple[StoredRecord, bool]: ...
    async def get_record(self, tenant: str, collection: str, record_id: str) -> StoredRecord | None: ...
    async def scan_records(self, tenant: str, collection: str) -> list[StoredRecord]: ...
    async def page_records(self, tenant: str, collection: str, window: SeqWindow) -> SeqPage:
        """Records in store order after/before a position, read with an index range, not a scan."""
        ...

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
    ) -> StoredRecord: ...
    async def delete_record(self, tenant: str, collection: str, record_id: str, *, if_match: str | None) -> None: ...
    async def usage(self, tenant: str) -> tuple[int, int]: ...
    async def purge_idempotency(self, before: float) -> int:
        """Forget idempotency keys first used before `before` (epoch seconds); return how many."""
        ...


class SqliteRecordStore:
    """`RecordStore` on the connection of the service's SQLite store."""

    def __init__(self, store: SqliteConnection) -> None:
        self._store = store

    async def create_collection(
        self, tenant: str, name: str, description: str, fields: tuple[str, ...] | None, now: str
    ) -> StoredCollection:
        blob = orjson.dumps(list(fields)) if fields is not None else None
        with self._store.transaction() as db:
            if db.execute("SELECT 1 FROM record_collections WHERE tenant = ? AND name = ?", (tenant, name)).fetchone():
                raise AlreadyExists(name)
            db.execute("INSERT INTO record_collections VALUES (?, ?, ?, ?, ?)", (tenant, name, description, blob, now))
        return StoredCollection(name, description, fields, now)

    async def get_collection(self, tenant: str, name: str) -> StoredCollection | None:
        # Every record write and listing asks this first; counting the records here would cost in
        # proportion to the collection, and none of them reads the count (record_count stays 0).
        with self._store.guard() as db:
            row = db.execute(
                "SELECT name, description, fields, created_at, 0 FROM record_collections WHERE tenant = ? AND name = ?",
                (tenant, name),
            ).fetchone()
        return _collection(row) if row else None

    async def list_collections(self, tenant: str) -> list[StoredCollection]:
        with self._store.guard() as db:
            rows = db.execute(
                "SELECT name, description, fields, created_at, "
                "(SELECT count(*) FROM records r WHERE r.tenant = c.tenant AND r.collection = c.name) "
                "FROM record_collections c WHERE tenant = ? ORDER BY name",
                (tenant,),
            ).fetchall()
        return [_collection(row) for row in rows]

    async def delete_collection(self, tenant: str, name: str) -> int:
        with self._store.transaction() as db:
            if not db.execute(
                "SELECT 1 FROM record_collections WHERE tenant = ? AND name = ?", (tenant, name)
            ).fetchone():
                raise Missing(name)
            count, size = db.execute(
                "SELECT count(*), coalesce(sum(size), 0) FROM records WHERE tenant = ? AND collection = ?",
                (tenant, name),
            ).fetchone()
            db.execute("DELETE FROM records WHERE tenant = ? AND collection = ?", (tenant, name))
            db.execute("DELETE FROM record_collections WHERE tenant = ? AND name = ?", (tenant, name))
            _add_usage(db, tenant, -count, -size)
        return int(count)

    async def create_record(
        self, tenant: str, record: NewRecord, quota: Quota, idempotency: Idempotency | None
    ) -> tuple[StoredRecord, bool]:
        """The new record, or the first one for a repeated idempotency key (then True)."""
        body = orjson.dumps(record.data)
        with self._store.transaction() as db:
            if idempotency is not None:
                row = db.execute(
                    "SELECT request_hash, response FROM record_idempotency WHERE tenant = ? AND key = ?",
                    (tenant, idempotency.key),
                ).fetchone()
                if row is not None:
                    if row[0] != idempotency.request_hash:
                        raise KeyReused(idempotency.key)
                    return StoredRecord(**orjson.loads(row[1]), seq=0), True
            if not db.execute(
                "SELECT 1 FROM record_collections WHERE tenant = ? AND name = ?", (tenant, record.collection)
            ).fetchone():
                raise Missing(record.collection)
            _check_quota(db, tenant, 1, len(body), quota)
            cursor = db.execute(
                "INSERT INTO records (tenant, collection, id, data, size, etag, created_at, updated_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (tenant, record.collection, record.id, body, len(body), record.etag, record.now, record.now),
            )
            _add_usage(db, tenant, 1, len(body))
            stored = StoredRecord(
                record.collection,
                record.id,
                record.data,
                record.etag,
                record.now,
                record.now,
                int(cursor.lastrowid or 0),
            )
            if idempotency is not None:
                db.execute(
                    "INSERT INTO record_idempotency VALUES (?, ?, ?, ?, ?)",
                    (
                        tenant,
                        idempotency.key,
                        idempotency.request_hash,
                        orjson.dumps(_first_response(stored)),
                        record.now,
                    ),
                )
        return stored, False

    async def get_record(self, tenant: str, collection: str, record_id: str) -> StoredRecord | None:
        with self._store.guard() as db:
            row = db.execute(
                f"SELECT {_COLUMNS} FROM records WHERE tenant = ? AND collection = ? AND id = ?",  # noqa: S608
                (tenant, collection, record_id),
            ).fetchone()
        return _record(row) if row else None

    async def scan_records(self, tenant: str, collection: str) -> list[StoredRecord]:
        with self._store.guard() as db:
            rows = db.execute(
                f"SELECT {_COLUMNS} FROM records WHERE tenant = ? AND collection = ? ORDER BY seq",  # noqa: S608
                (tenant, collection),
            ).fetchall()
        return [_record(row) for row in rows]

    async def page_records(self, tenant: str, collection: str, window: SeqWindow) -> SeqPage:
        scope = "tenant = ? AND collection = ?"
        with self._store.guard() as db:
            if window.forward:
                low = window.after if window.after is not None else -1
                rows = db.execute(
                    f"SELECT {_COLUMNS} FROM records WHERE {scope} AND seq > ? ORDER BY seq LIMIT ?",  # noqa: S608
                    (tenant, collection, low, window.size),
                ).fetchall()
            else:
                high = window.before if window.before is not None else 2**63 - 1
                rows = db.execute(
                    f"SELECT {_COLUMNS} FROM records WHERE {scope} AND seq < ? ORDER BY seq DESC LIMIT ?",  # noqa: S608
                    (tenant, collection, high, window.size),
                ).fetchall()[::-1]
            total = int(db.execute(f"SELECT count(*) FROM records WHERE {scope}", (tenant, collection)).fetchone()[0])  # noqa: S608
            records = [_record(row) for row in rows]
            exists = f"SELECT EXISTS (SELECT 1 FROM records WHERE {scope} AND seq {{}} ?)"  # noqa: S608

            def any_where(op: str, seq: int) -> bool:
                return bool(db.execute(exists.format(op), (tenant, collection, seq)).fetchone()[0])

            if records:
                before, after = any_where("<", records[0].seq), any_where(">", records[-1].seq)
            elif window.forward:
                before, after = any_where("<=", low), False
            else:
                before, after = False, any_where(">=", high)
        return SeqPage(records, total, before, after)

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
        with self._store.transaction() as db:
            row = db.execute(
                f"SELECT {_COLUMNS}, size FROM records WHERE tenant = ? AND collection = ? AND id = ?",  # noqa: S608
                (tenant, collection, record_id),
            ).fetchone()
            if row is None:
                raise Missing(record_id)
            current = _record(row)
            if if_match is not None and if_match != current.etag:
                raise VersionMismatch(current.etag)
            data = change(current.data)
            body = orjson.dumps(data)
            _check_quota(db, tenant, 0, len(body) - row[-1], quota)
            db.execute(
                "UPDATE records SET data = ?, size = ?, etag = ?, updated_at = ? WHERE seq = ?",
                (body, len(body), etag, now, current.seq),
            )
            _add_usage(db, tenant, 0, len(body) - row[-1])
        return StoredRecord(collection, record_id, data, etag, current.created_at, now, current.seq)

    async def delete_record(self, tenant: str, collection: str, record_id: str, *, if_match: str | None) -> None:
        with self._store.transaction() as db:
            row = db.execute(
                "SELECT seq, etag, size FROM records WHERE tenant = ? AND collection = ? AND id = ?",
                (tenant, collection, record_id),
            ).fetchone()
            if row is None:
                raise Missing(record_id)
            if if_match is not None and if_match != row[1]:
                raise VersionMismatch(row[1])
            db.execute("DELETE FROM records WHERE seq = ?", (row[0],))
            _add_usage(db, tenant, -1, -row[2])

    async def usage(self, tenant: str) -> tuple[int, int]:
        with self._store.guard() as db:
            row = db.execute("SELECT records, bytes FROM record_usage WHERE tenant = ?", (tenant,)).fetchone()
        return (int(row[0]), int(row[1])) if row else (0, 0)

    async def purge_idempotency(self, before: float) -> int:
        with self._store.transaction() as db:
            cutoff = timestamp(before)
            return int(db.execute("DELETE FROM record_idempotency WHERE created_at < ?", (cutoff,)).rowcount)


_COLUMNS = "collection, id, data, etag, created_at, updated_at, seq"


def _record(row: tuple[Any, ...]) -> StoredRecord:
    return StoredRecord(row[0], row[1], orjson.loads(row[2]), row[3], row[4], row[5], row[6])


def _collection(row: tuple[Any, ...]) -> StoredCollection:
    fields = tuple(orjson.loads(row[2])) if row[2] is not None else None
    return StoredCollection(row[0], row[1], fields, row[3], int(row[4]))


def _first_response(record: StoredRecord) -> dict[str, Any]:
    return {
        "collection": record.collection,
        "id": record.id,
        "data": record.data,
        "etag": record.etag,
        "created_at": record.created_at,
        "updated_at": record.updated_at,
    }


def _check_quota(db: sqlite3.Connection, tenant: str, records: int, size: int, quota: Quota) -> None:
    row = db.execute("SELECT records, bytes FROM record_usage WHERE tenant = ?", (tenant,)).fetchone()
    used_records, used_bytes = (row[0], row[1]) if row else (0, 0)
    if records and used_records + records > quota.max_records:
        raise QuotaExceeded("records", used_records, quota.max_records)
    if size > 0 and used_bytes + size > quota.max_bytes:
        raise QuotaExceeded("bytes", used_bytes, quota.max_bytes)


def _add_usage(db: sqlite3.Connection, tenant: str, records: int, size: int) -> None:
    db.execute(
        "INSERT INTO record_usage VALUES (?, ?, ?) ON CONFLICT (tenant) "
        "DO UPDATE SET records = records + excluded.records, bytes = bytes + excluded.bytes",
        (tenant, records, size),
    )
