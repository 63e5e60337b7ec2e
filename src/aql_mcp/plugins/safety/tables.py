"""The safety plugin's tables on both engines and its facet (docs/store.md, "A plugin's own tables").

Migration 1 was a core migration of release 0.2.0 (`legacy_core`): a store written then already
holds it and is adopted, not migrated again; the later ones are the plugin's own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aql_mcp.plugin import Migration, SqliteEngine, Tables
from aql_mcp.plugins.safety.sqlite import SqliteSafetyStore
from aql_mcp.plugins.safety.store import SafetyStore

if TYPE_CHECKING:
    from aql_mcp.plugin import PostgresEngine

# `additive`: whether the release before a migration still runs on the tables it leaves (docs/store.md).
SQLITE: tuple[Migration, ...] = (
    # 1: the execution safety loop (docs/safety.md): monitored runs, out-of-band challenges, hard
    # blocks per principal (they outlive a restart, §8.8.3), approvals, pull-based notices, failed
    # verifications per principal (rate limit, §8.8.5) and the audit trail
    Migration(
        """
        CREATE TABLE safety_runs (
            id TEXT PRIMARY KEY,
            agent TEXT NOT NULL,
            principal TEXT NOT NULL,
            session TEXT,
            status TEXT NOT NULL,
            steps INTEGER NOT NULL,
            started_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            ended_at REAL,
            last_action TEXT,
            reason TEXT,
            settings BLOB NOT NULL
        ) WITHOUT ROWID;
        CREATE INDEX safety_runs_status ON safety_runs (status, principal);
        CREATE TABLE safety_challenges (
            id TEXT PRIMARY KEY,
            agent TEXT NOT NULL,
            run_id TEXT NOT NULL,
            principal TEXT NOT NULL,
            tier TEXT NOT NULL,
            action TEXT NOT NULL,
            reason TEXT NOT NULL,
            code TEXT NOT NULL,
            status TEXT NOT NULL,
            created_at REAL NOT NULL,
            expires_at REAL NOT NULL,
            decided_at REAL,
            decided_by TEXT
        ) WITHOUT ROWID;
        CREATE INDEX safety_challenges_pending ON safety_challenges (status, principal);
        CREATE TABLE safety_blocks (
            principal TEXT PRIMARY KEY,
            agent TEXT NOT NULL,
            challenge_id TEXT NOT NULL,
            reason TEXT NOT NULL,
            created_at REAL NOT NULL
        ) WITHOUT ROWID;
        CREATE TABLE safety_approvals (
            id TEXT PRIMARY KEY,
            agent TEXT NOT NULL,
            run_id TEXT NOT NULL,
            principal TEXT NOT NULL,
            kind TEXT NOT NULL,
            action TEXT NOT NULL,
            reason TEXT NOT NULL,
            status TEXT NOT NULL,
            created_at REAL NOT NULL,
            decided_at REAL,
            decided_by TEXT,
            token_hash TEXT,
            used_at REAL
        ) WITHOUT ROWID;
        CREATE INDEX safety_approvals_principal ON safety_approvals (principal, action);
        CREATE INDEX safety_approvals_token ON safety_approvals (token_hash);
        CREATE TABLE safety_notices (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            agent TEXT NOT NULL,
            type TEXT NOT NULL,
            message TEXT NOT NULL,
            metadata BLOB NOT NULL,
            created_at REAL NOT NULL,
            cleared_at REAL,
            ref TEXT
        );
        CREATE INDEX safety_notices_agent ON safety_notices (agent, cleared_at);
        CREATE INDEX safety_notices_ref ON safety_notices (ref);
        CREATE TABLE safety_failures (
            principal TEXT NOT NULL,
            at REAL NOT NULL
        );
        CREATE INDEX safety_failures_principal ON safety_failures (principal, at);
        CREATE TABLE safety_events (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            at REAL NOT NULL,
            agent TEXT NOT NULL,
            kind TEXT NOT NULL,
            actor TEXT NOT NULL,
            detail BLOB NOT NULL
        );
        """,
        additive=False,
        legacy_core=9,
    ),
    # 2: `list_executions` reads one principal's runs of every state, newest first (docs/executions.md,
    # "Agent runs"); the release before runs on it unchanged
    Migration("CREATE INDEX safety_runs_principal ON safety_runs (principal, started_at, id);", additive=True),
)

POSTGRES: tuple[Migration, ...] = (
    # 1: the execution safety loop, as on SQLite
    Migration(
        """
        CREATE TABLE safety_runs (
            id TEXT COLLATE "C" PRIMARY KEY,
            agent TEXT NOT NULL,
            principal TEXT COLLATE "C" NOT NULL,
            session TEXT,
            status TEXT NOT NULL,
            steps BIGINT NOT NULL,
            started_at DOUBLE PRECISION NOT NULL,
            updated_at DOUBLE PRECISION NOT NULL,
            ended_at DOUBLE PRECISION,
            last_action TEXT,
            reason TEXT,
            settings BYTEA NOT NULL
        );
        CREATE INDEX safety_runs_status ON safety_runs (status, principal);
        CREATE TABLE safety_challenges (
            id TEXT COLLATE "C" PRIMARY KEY,
            agent TEXT NOT NULL,
            run_id TEXT NOT NULL,
            principal TEXT COLLATE "C" NOT NULL,
            tier TEXT NOT NULL,
            action TEXT NOT NULL,
            reason TEXT NOT NULL,
            code TEXT NOT NULL,
            status TEXT NOT NULL,
            created_at DOUBLE PRECISION NOT NULL,
            expires_at DOUBLE PRECISION NOT NULL,
            decided_at DOUBLE PRECISION,
            decided_by TEXT
        );
        CREATE INDEX safety_challenges_pending ON safety_challenges (status, principal);
        CREATE TABLE safety_blocks (
            principal TEXT COLLATE "C" PRIMARY KEY,
            agent TEXT NOT NULL,
            challenge_id TEXT NOT NULL,
            reason TEXT NOT NULL,
            created_at DOUBLE PRECISION NOT NULL
        );
        CREATE TABLE safety_approvals (
            id TEXT COLLATE "C" PRIMARY KEY,
            agent TEXT NOT NULL,
            run_id TEXT NOT NULL,
            principal TEXT COLLATE "C" NOT NULL,
            kind TEXT NOT NULL,
            action TEXT NOT NULL,
            reason TEXT NOT NULL,
            status TEXT NOT NULL,
            created_at DOUBLE PRECISION NOT NULL,
            decided_at DOUBLE PRECISION,
            decided_by TEXT,
            token_hash TEXT,
            used_at DOUBLE PRECISION
        );
        CREATE INDEX safety_approvals_principal ON safety_approvals (principal, action);
        CREATE INDEX safety_approvals_token ON safety_approvals (token_hash);
        CREATE TABLE safety_notices (
            id BIGSERIAL PRIMARY KEY,
            agent TEXT COLLATE "C" NOT NULL,
            type TEXT NOT NULL,
            message TEXT NOT NULL,
            metadata BYTEA NOT NULL,
            created_at DOUBLE PRECISION NOT NULL,
            cleared_at DOUBLE PRECISION,
            ref TEXT
        );
        CREATE INDEX safety_notices_agent ON safety_notices (agent, cleared_at);
        CREATE INDEX safety_notices_ref ON safety_notices (ref);
        CREATE TABLE safety_failures (
            principal TEXT COLLATE "C" NOT NULL,
            at DOUBLE PRECISION NOT NULL
        );
        CREATE INDEX safety_failures_principal ON safety_failures (principal, at);
        CREATE TABLE safety_events (
            id BIGSERIAL PRIMARY KEY,
            at DOUBLE PRECISION NOT NULL,
            agent TEXT NOT NULL,
            kind TEXT NOT NULL,
            actor TEXT NOT NULL,
            detail BYTEA NOT NULL
        );
        """,
        additive=False,
        legacy_core=4,
    ),
    # 2: as on SQLite
    Migration("CREATE INDEX safety_runs_principal ON safety_runs (principal, started_at, id);", additive=True),
)


def _on_sqlite(engine: SqliteEngine) -> SafetyStore:
    return SqliteSafetyStore(engine)


def _on_postgres(engine: PostgresEngine) -> SafetyStore:
    # Imported here: a SQLite deployment never loads asyncpg.
    from aql_mcp.plugins.safety.postgres import PostgresSafetyStore

    return PostgresSafetyStore(engine)


TABLES: Tables[SafetyStore] = Tables("safety", SQLITE, POSTGRES, _on_sqlite, _on_postgres)
