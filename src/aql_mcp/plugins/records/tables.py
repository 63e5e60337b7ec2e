"""The records plugin's tables on both engines and its facet (docs/store.md, "A plugin's own tables").

Every migration here was a core migration of release 0.2.0 (`legacy_core`): a store written then
already holds them and is adopted, not migrated again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aql_mcp.plugin import Migration, PluginOperations, SqliteEngine, Tables
from aql_mcp.plugins.records.sqlite import SqliteRecordStore
from aql_mcp.plugins.records.store import RecordStore

if TYPE_CHECKING:
    from aql_mcp.plugin import PostgresEngine

# `additive`: whether the release before a migration still runs on the tables it leaves (docs/store.md).
SQLITE: tuple[Migration, ...] = (
    # 1: collections and JSON records per tenant, usage for quotas, and the idempotency keys of
    # create_record (plugins/records/store.py)
    Migration(
        """
        CREATE TABLE record_collections (
            tenant TEXT NOT NULL,
            name TEXT NOT NULL,
            description TEXT NOT NULL,
            fields BLOB,
            created_at TEXT NOT NULL,
            PRIMARY KEY (tenant, name)
        ) WITHOUT ROWID;
        CREATE TABLE records (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            tenant TEXT NOT NULL,
            collection TEXT NOT NULL,
            id TEXT NOT NULL,
            data BLOB NOT NULL,
            size INTEGER NOT NULL,
            etag TEXT NOT NULL,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            UNIQUE (tenant, collection, id)
        );
        CREATE INDEX records_collection ON records (tenant, collection, seq);
        CREATE TABLE record_usage (
            tenant TEXT PRIMARY KEY,
            records INTEGER NOT NULL,
            bytes INTEGER NOT NULL
        ) WITHOUT ROWID;
        CREATE TABLE record_idempotency (
            tenant TEXT NOT NULL,
            key TEXT NOT NULL,
            request_hash TEXT NOT NULL,
            response BLOB NOT NULL,
            created_at TEXT NOT NULL,
            PRIMARY KEY (tenant, key)
        ) WITHOUT ROWID;
        """,
        additive=False,
        legacy_core=3,
    ),
    # 2: the index that lets housekeeping drop old idempotency keys
    Migration(
        """
        CREATE INDEX record_idempotency_age ON record_idempotency (created_at);
        """,
        additive=True,
        legacy_core=4,
    ),
    # 3: a record's position counts within its own collection, so a cursor says nothing of other
    # tenants' writes; collections keep their record count (a free `totalCount`).
    # Breaking: it drops an index and positions records by the new `pos` column, which a release
    # before it would leave at 0 (the unique position index would refuse its second record).
    Migration(
        """
        ALTER TABLE record_collections ADD COLUMN next_pos INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE record_collections ADD COLUMN record_count INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE records ADD COLUMN pos INTEGER NOT NULL DEFAULT 0;
        UPDATE records SET pos = seq;
        UPDATE record_collections SET
            next_pos = coalesce((SELECT max(r.pos) FROM records r
                                 WHERE r.tenant = record_collections.tenant
                                   AND r.collection = record_collections.name), 0),
            record_count = (SELECT count(*) FROM records r
                            WHERE r.tenant = record_collections.tenant AND r.collection = record_collections.name);
        DROP INDEX records_collection;
        CREATE UNIQUE INDEX records_position ON records (tenant, collection, pos);
""",
        additive=False,
        legacy_core=5,
    ),
    # 4: the indexes collections declare (plugins/records/indexes.py); the engine's own indexes are
    # built from these rows, not by a migration
    Migration(
        """
        CREATE TABLE record_indexes (
            tenant TEXT NOT NULL,
            collection TEXT NOT NULL,
            field TEXT NOT NULL,
            type TEXT NOT NULL,
            created_at TEXT NOT NULL,
            PRIMARY KEY (tenant, collection, field, type)
        ) WITHOUT ROWID;
        CREATE INDEX record_indexes_declared ON record_indexes (field, type);
        """,
        additive=True,
    ),
)

POSTGRES: tuple[Migration, ...] = (
    # 1: the SQLite tables at their version 3, with JSONB records and a GIN index for containment
    Migration(
        """
        CREATE TABLE record_collections (
            tenant TEXT COLLATE "C" NOT NULL,
            name TEXT COLLATE "C" NOT NULL,
            description TEXT NOT NULL,
            fields JSONB,
            created_at TEXT COLLATE "C" NOT NULL,
            next_pos BIGINT NOT NULL DEFAULT 0,
            record_count BIGINT NOT NULL DEFAULT 0,
            PRIMARY KEY (tenant, name)
        );
        CREATE TABLE records (
            tenant TEXT COLLATE "C" NOT NULL,
            collection TEXT COLLATE "C" NOT NULL,
            pos BIGINT NOT NULL,
            id TEXT COLLATE "C" NOT NULL,
            data JSONB NOT NULL,
            size INTEGER NOT NULL,
            etag TEXT COLLATE "C" NOT NULL,
            created_at TEXT COLLATE "C" NOT NULL,
            updated_at TEXT COLLATE "C" NOT NULL,
            PRIMARY KEY (tenant, collection, pos),
            UNIQUE (tenant, collection, id)
        );
        CREATE INDEX records_data ON records USING gin (data jsonb_path_ops);
        CREATE TABLE record_usage (
            tenant TEXT COLLATE "C" PRIMARY KEY,
            records BIGINT NOT NULL,
            bytes BIGINT NOT NULL
        );
        CREATE TABLE record_idempotency (
            tenant TEXT COLLATE "C" NOT NULL,
            key TEXT COLLATE "C" NOT NULL,
            request_hash TEXT NOT NULL,
            response BYTEA NOT NULL,
            created_at TEXT COLLATE "C" NOT NULL,
            PRIMARY KEY (tenant, key)
        );
        CREATE INDEX record_idempotency_age ON record_idempotency (created_at);
        """,
        additive=False,
        legacy_core=1,
    ),
    # 2: the indexes collections declare, as on SQLite at its version 4
    Migration(
        """
        CREATE TABLE record_indexes (
            tenant TEXT COLLATE "C" NOT NULL,
            collection TEXT COLLATE "C" NOT NULL,
            field TEXT COLLATE "C" NOT NULL,
            type TEXT COLLATE "C" NOT NULL,
            created_at TEXT COLLATE "C" NOT NULL,
            PRIMARY KEY (tenant, collection, field, type)
        );
        CREATE INDEX record_indexes_declared ON record_indexes (field, type);
        """,
        additive=True,
    ),
)


def _on_sqlite(engine: SqliteEngine) -> RecordStore:
    return SqliteRecordStore(engine)


def _on_postgres(engine: PostgresEngine) -> RecordStore:
    # Imported here: a SQLite deployment never loads asyncpg.
    from aql_mcp.plugins.records.postgres import PostgresRecordStore

    return PostgresRecordStore(engine)


TABLES: Tables[RecordStore] = Tables("records", SQLITE, POSTGRES, _on_sqlite, _on_postgres)


def bound_records(operations: PluginOperations) -> RecordStore:
    """The records facet on the service's store, scanning at most `store.listing_scan_rows` rows per
    listing for at most `store.listing_timeout_seconds`; the executions plugin, which builds on
    records, takes it through here too."""
    records = operations.tables(TABLES)
    records.scan_rows = operations.settings.store.listing_scan_rows
    records.listing_seconds = operations.settings.store.listing_timeout_seconds
    return records
