"""Declared indexes on SQLite (plugins/records/indexes.py; docs/store.md, "Indexed fields").

A declaration is a write like any other; the index itself is built on a connection and a thread of
its own (`SqliteEngine.maintain`), so the writer thread and the readers go on. SQLite builds an index
in one statement that holds the database's write lock until it ends: reads go on (WAL), and a write
meanwhile waits for the lock up to `store.lock_timeout_seconds`, then fails with 503 (retryable).
"""

from __future__ import annotations

import sqlite3
import time
from functools import partial

from aql_mcp.plugin import SqliteEngine
from aql_mcp.plugins.records.indexes import from_json, index_of
from aql_mcp.plugins.records.listing import PREFIX, Index
from aql_mcp.plugins.records.sqlite_dialect import SqliteDialect
from aql_mcp.plugins.records.store import AlreadyExists, IndexMissing, Missing, QuotaExceeded, timestamp

DIALECT = SqliteDialect()
DECLARED = "SELECT DISTINCT field, type FROM record_indexes"
# A collection's declarations as one JSON text, in field order (the collection's read selects it).
OF_COLLECTION = (
    "(SELECT json_group_array(json_array(field, type)) FROM (SELECT field, type FROM record_indexes AS i "
    "WHERE i.tenant = record_collections.tenant AND i.collection = record_collections.name ORDER BY field, type))"
)


def declare(
    db: sqlite3.Connection, tenant: str, collection: str, new: tuple[Index, ...], limit: int, now: str
) -> tuple[Index, ...]:
    """Add `new` to the collection's declared indexes inside the caller's transaction; the tenant's
    count checked against `limit` in the same transaction."""
    if (
        db.execute("SELECT 1 FROM record_collections WHERE tenant = ? AND name = ?", (tenant, collection)).fetchone()
        is None
    ):
        raise Missing(collection)
    current = _declared(db, tenant, collection)
    for index in new:
        if index in current:
            raise AlreadyExists(index.field)
    used = int(db.execute("SELECT count(*) FROM record_indexes WHERE tenant = ?", (tenant,)).fetchone()[0])
    if new and used + len(new) > limit:
        raise QuotaExceeded("indexes", used, limit)
    db.executemany(
        "INSERT INTO record_indexes VALUES (?, ?, ?, ?, ?)",
        [(tenant, collection, index.field, index.type, now) for index in new],
    )
    return _declared(db, tenant, collection)


def undeclare(db: sqlite3.Connection, tenant: str, collection: str, index: Index) -> tuple[Index, ...]:
    if (
        db.execute("SELECT 1 FROM record_collections WHERE tenant = ? AND name = ?", (tenant, collection)).fetchone()
        is None
    ):
        raise Missing(collection)
    gone = db.execute(
        "DELETE FROM record_indexes WHERE tenant = ? AND collection = ? AND field = ? AND type = ?",
        (tenant, collection, index.field, index.type),
    ).rowcount
    if gone != 1:
        raise IndexMissing(index.field)
    return _declared(db, tenant, collection)


def _declared(db: sqlite3.Connection, tenant: str, collection: str) -> tuple[Index, ...]:
    rows = db.execute(
        "SELECT field, type FROM record_indexes WHERE tenant = ? AND collection = ? ORDER BY field, type",
        (tenant, collection),
    ).fetchall()
    return from_json(rows)


def create_sql(index: Index) -> str:
    expression = DIALECT.index_expression(index)
    return f"CREATE INDEX IF NOT EXISTS {index.name} ON records (tenant, collection, {expression}, pos)"


class SqliteIndexes:
    """The index half of `SqliteRecordStore` (sqlite.py)."""

    _engine: SqliteEngine
    # Names this process is building: an index whose CREATE has not committed yet shows nowhere else.
    _building: set[str]

    async def add_index(self, tenant: str, collection: str, index: Index, max_indexes: int) -> tuple[Index, ...]:
        stamp = timestamp(time.time())
        return await self._engine.write(lambda db: declare(db, tenant, collection, (index,), max_indexes, stamp))

    async def remove_index(self, tenant: str, collection: str, index: Index) -> tuple[Index, ...]:
        return await self._engine.write(lambda db: undeclare(db, tenant, collection, index))

    async def build_index(self, index: Index) -> None:
        self._building.add(index.name)
        try:
            await self._engine.maintain(lambda db: db.execute(create_sql(index)))
        finally:
            self._building.discard(index.name)

    async def drop_unused_index(self, index: Index) -> bool:
        return await self._engine.maintain(lambda db: _drop_undeclared(db, index.name))

    async def index_states(self, indexes: tuple[Index, ...]) -> dict[Index, str]:
        built = await self._engine.read(_built)
        return {
            index: "ready" if index.name in built else "building" if index.name in self._building else "missing"
            for index in indexes
        }

    async def reconcile_indexes(self) -> int:
        declared = await self._engine.read(
            lambda db: {index_of(field, kind) for field, kind in db.execute(DECLARED).fetchall()}
        )
        built = await self._engine.read(_built)
        changed = 0
        for index in sorted(declared, key=lambda i: i.name):
            if index.name not in built and index.name not in self._building:
                await self.build_index(index)
                changed += 1
        wanted = {index.name for index in declared}
        for name in sorted(built - wanted - self._building):
            changed += await self._engine.maintain(partial(_drop_undeclared, name=name))
        return changed


def _drop_undeclared(db: sqlite3.Connection, name: str) -> bool:
    """Drop index `name` unless a collection declares it, both in one transaction: a declaration
    racing with it either comes first (and keeps the index) or finds it gone (and builds it)."""
    db.execute("BEGIN IMMEDIATE")
    try:
        names = {index_of(field, kind).name for field, kind in db.execute(DECLARED).fetchall()}
        dropped = name not in names and name in _built(db)
        if dropped:
            db.execute(f"DROP INDEX IF EXISTS {name}")
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    return dropped


def _built(db: sqlite3.Connection) -> set[str]:
    rows = db.execute(
        "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'records' AND name LIKE ? ESCAPE '\\'",
        (PREFIX.replace("_", "\\_") + "%",),
    ).fetchall()
    return {row[0] for row in rows}
