"""The executions plugin's tables on both engines and its facet (docs/store.md, "A plugin's own tables").

Every migration here was a core migration of release 0.2.0 (`legacy_core`): a store written then
already holds them and is adopted, not migrated again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aql_mcp.plugin import Migration, SqliteEngine, Tables
from aql_mcp.plugins.executions.sqlite import SqliteExecutionStore
from aql_mcp.plugins.executions.store import ExecutionStore

if TYPE_CHECKING:
    from aql_mcp.plugin import PostgresEngine

# `additive`: whether the release before a migration still runs on the tables it leaves (docs/store.md).
SQLITE: tuple[Migration, ...] = (
    # 1: executions (plugins/executions/store.py, MCP-AQL §8.4): the row is the truth every replica
    # reads; `payload` is kept only while a retry may need it
    Migration(
        """
        CREATE TABLE executions (
            id TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            kind TEXT NOT NULL,
            status TEXT NOT NULL,
            session_id TEXT,
            params BLOB NOT NULL,
            progress_current INTEGER NOT NULL,
            progress_total INTEGER,
            progress_message TEXT,
            report BLOB NOT NULL,
            rejected INTEGER NOT NULL,
            error BLOB,
            result BLOB,
            replica TEXT,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            started_at REAL,
            finished_at REAL,
            attempts INTEGER NOT NULL,
            payload BLOB,
            output BLOB
        ) WITHOUT ROWID;
        CREATE INDEX executions_owner ON executions (owner, created_at);
        CREATE INDEX executions_status ON executions (status, replica);
        CREATE INDEX executions_session ON executions (session_id);
        CREATE INDEX executions_finished ON executions (finished_at);
        """,
        additive=False,
        legacy_core=8,
    ),
    # 2: the principal that started an execution: MCP 2025-11-25 tasks are bound to it (an
    # execution itself belongs to the records tenant), listed newest first by (created_at, id)
    Migration(
        """
        ALTER TABLE executions ADD COLUMN principal TEXT;
        CREATE INDEX executions_principal ON executions (owner, principal, created_at, id);
        """,
        additive=True,
        legacy_core=10,
    ),
    # 3: an export's NDJSON in parts, each written in a short transaction of its own and read
    # back one part at a time (docs/executions.md, "Exports"); `executions.output` is read only for
    # exports completed before this migration
    Migration(
        """
        CREATE TABLE execution_parts (
            execution_id TEXT NOT NULL,
            part INTEGER NOT NULL,
            data BLOB NOT NULL,
            PRIMARY KEY (execution_id, part)
        );
        """,
        additive=True,
        legacy_core=13,
    ),
    # 4: leases (plugins/executions/store.py): when the lease of the attempt running an execution
    # ends, and how often other replicas took it over. No row for its current attempt: not leased
    # (judged by its replica's heartbeat). A table of its own: older rows stay as they were.
    Migration(
        """
        CREATE TABLE execution_leases (
            execution_id TEXT PRIMARY KEY REFERENCES executions (id) ON DELETE CASCADE,
            attempt INTEGER NOT NULL,
            lease_until REAL NOT NULL,
            takeovers INTEGER NOT NULL
        ) WITHOUT ROWID;
        CREATE INDEX execution_leases_until ON execution_leases (lease_until);
        """,
        additive=True,
    ),
)

POSTGRES: tuple[Migration, ...] = (
    # 1: executions, as on SQLite
    Migration(
        """
        CREATE TABLE executions (
            id TEXT COLLATE "C" PRIMARY KEY,
            owner TEXT COLLATE "C" NOT NULL,
            kind TEXT NOT NULL,
            status TEXT NOT NULL,
            session_id TEXT,
            params BYTEA NOT NULL,
            progress_current BIGINT NOT NULL,
            progress_total BIGINT,
            progress_message TEXT,
            report BYTEA NOT NULL,
            rejected BIGINT NOT NULL,
            error BYTEA,
            result BYTEA,
            replica TEXT,
            created_at DOUBLE PRECISION NOT NULL,
            updated_at DOUBLE PRECISION NOT NULL,
            started_at DOUBLE PRECISION,
            finished_at DOUBLE PRECISION,
            attempts BIGINT NOT NULL,
            payload BYTEA,
            output BYTEA
        );
        CREATE INDEX executions_owner ON executions (owner, created_at);
        CREATE INDEX executions_status ON executions (status, replica);
        CREATE INDEX executions_session ON executions (session_id);
        CREATE INDEX executions_finished ON executions (finished_at);
        """,
        additive=False,
        legacy_core=3,
    ),
    # 2: the principal that started an execution, as on SQLite
    Migration(
        """
        ALTER TABLE executions ADD COLUMN principal TEXT COLLATE "C";
        CREATE INDEX executions_principal ON executions (owner, principal, created_at, id);
        """,
        additive=True,
        legacy_core=5,
    ),
    # 3: an export's NDJSON in parts, as on SQLite
    Migration(
        """
        CREATE TABLE execution_parts (
            execution_id TEXT COLLATE "C" NOT NULL,
            part INTEGER NOT NULL,
            data BYTEA NOT NULL,
            PRIMARY KEY (execution_id, part)
        );
        """,
        additive=True,
        legacy_core=8,
    ),
    # 4: leases, as on SQLite (database clock)
    Migration(
        """
        CREATE TABLE execution_leases (
            execution_id TEXT COLLATE "C" PRIMARY KEY REFERENCES executions (id) ON DELETE CASCADE,
            attempt BIGINT NOT NULL,
            lease_until DOUBLE PRECISION NOT NULL,
            takeovers BIGINT NOT NULL
        );
        CREATE INDEX execution_leases_until ON execution_leases (lease_until);
        """,
        additive=True,
    ),
)


def _on_sqlite(engine: SqliteEngine) -> ExecutionStore:
    return SqliteExecutionStore(engine)


def _on_postgres(engine: PostgresEngine) -> ExecutionStore:
    # Imported here: a SQLite deployment never loads asyncpg.
    from aql_mcp.plugins.executions.postgres import PostgresExecutionStore

    return PostgresExecutionStore(engine, engine.replica)


TABLES: Tables[ExecutionStore] = Tables("executions", SQLITE, POSTGRES, _on_sqlite, _on_postgres)
