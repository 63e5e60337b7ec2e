"""The PostgreSQL schema: numbered migrations applied at startup under an advisory lock.

Every replica runs `migrate` when it starts. The transaction-scoped advisory lock makes replicas
starting together take turns: the first applies what is missing, the others then find nothing to do.
Text columns that are compared or sorted use the "C" collation, so they order by code point, as
SQLite does and as the listing rules say (docs/store.md).
"""

from __future__ import annotations

import asyncpg

from aql_mcp.store.migration import Migration, check_compatible, compatible_from

# pg_advisory_xact_lock key of the migrations: any constant, the same in every release.
MIGRATION_LOCK = 0x61716C6D6370  # "aqlmcp"

# `additive`: whether the release before a migration still runs on the schema it leaves (store/migration.py).
MIGRATIONS: tuple[Migration, ...] = (
    # 1 is the base of the schema: no release before it.
    # 1: sessions, the SSE event log and its per-stream counters, resource subscriptions, records,
    # confirmation tokens (the SQLite schema at its version 5), and the bus: signals and replicas
    Migration(
        """
        CREATE TABLE sessions (
            id TEXT COLLATE "C" PRIMARY KEY,
            owner TEXT COLLATE "C" NOT NULL,
            protocol_version TEXT NOT NULL,
            client_info BYTEA NOT NULL,
            client_capabilities BYTEA NOT NULL,
            log_level TEXT NOT NULL,
            created_at DOUBLE PRECISION NOT NULL,
            last_seen DOUBLE PRECISION NOT NULL
        );
        CREATE INDEX sessions_owner ON sessions (owner);
        CREATE INDEX sessions_last_seen ON sessions (last_seen);
        CREATE TABLE streams (
            session_id TEXT COLLATE "C" NOT NULL,
            stream_id TEXT COLLATE "C" NOT NULL,
            last_seq BIGINT NOT NULL,
            ended BOOLEAN NOT NULL DEFAULT FALSE,
            PRIMARY KEY (session_id, stream_id)
        );
        CREATE TABLE events (
            session_id TEXT COLLATE "C" NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            stream_id TEXT COLLATE "C" NOT NULL,
            seq BIGINT NOT NULL,
            data BYTEA NOT NULL,
            created_at DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (session_id, stream_id, seq)
        );
        CREATE INDEX events_created_at ON events (created_at);
        CREATE TABLE subscriptions (
            uri TEXT COLLATE "C" NOT NULL,
            session_id TEXT COLLATE "C" NOT NULL,
            PRIMARY KEY (uri, session_id)
        );
        CREATE INDEX subscriptions_session ON subscriptions (session_id);
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
        CREATE TABLE confirmations (
            token_hash TEXT COLLATE "C" PRIMARY KEY,
            operation TEXT NOT NULL,
            params_hash TEXT NOT NULL,
            principal TEXT NOT NULL,
            session TEXT NOT NULL,
            expires_at DOUBLE PRECISION NOT NULL,
            consumed_at DOUBLE PRECISION
        );
        CREATE INDEX confirmations_expiry ON confirmations (expires_at);
        CREATE TABLE signals (
            id BIGSERIAL PRIMARY KEY,
            origin TEXT NOT NULL,
            kind TEXT NOT NULL,
            session_id TEXT NOT NULL,
            target TEXT NOT NULL,
            payload BYTEA NOT NULL,
            created_at DOUBLE PRECISION NOT NULL
        );
        CREATE INDEX signals_created_at ON signals (created_at);
        CREATE TABLE replicas (
            id TEXT PRIMARY KEY,
            seen_at DOUBLE PRECISION NOT NULL
        );
        """,
        additive=False,
    ),
    # 2: tasks of the io.modelcontextprotocol/tasks extension (store/tasks.py), counted per owner for
    # the cap on live tasks and deleted once expired
    Migration(
        """
        CREATE TABLE tasks (
            id TEXT COLLATE "C" PRIMARY KEY,
            owner TEXT COLLATE "C" NOT NULL,
            tool TEXT NOT NULL,
            status TEXT NOT NULL,
            created_at DOUBLE PRECISION NOT NULL,
            updated_at DOUBLE PRECISION NOT NULL,
            expires_at DOUBLE PRECISION NOT NULL,
            ttl_ms BIGINT NOT NULL,
            poll_ms BIGINT NOT NULL,
            status_message TEXT,
            input_requests BYTEA NOT NULL,
            answers BYTEA NOT NULL,
            result BYTEA,
            error BYTEA
        );
        CREATE INDEX tasks_owner ON tasks (owner, status);
        CREATE INDEX tasks_expiry ON tasks (expires_at);
        """,
        additive=True,
    ),
    # 3: executions of the `executions` plugin (plugins/executions/store.py, MCP-AQL §8.4): the row is the
    # truth every replica reads; `payload` is kept only while a retry may need it
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
        additive=True,
    ),
    # 4: the execution safety loop (plugins/safety/store.py, docs/safety.md): monitored runs, out-of-band
    # challenges, hard blocks per principal (they outlive a restart, §8.8.3), approvals, pull-based
    # notices, failed verifications per principal (rate limit, §8.8.5) and the audit trail
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
        additive=True,
    ),
    # 5: the principal that started an execution: MCP 2025-11-25 tasks are bound to it (an
    # execution itself belongs to the records tenant), listed newest first by (created_at, id)
    Migration(
        """
        ALTER TABLE executions ADD COLUMN principal TEXT COLLATE "C";
        CREATE INDEX executions_principal ON executions (owner, principal, created_at, id);
        """,
        additive=True,
    ),
    # 6: tokens the operator console signed out, by their SHA-256, until they expire (issue 27, N6)
    Migration(
        """
        CREATE TABLE revoked_tokens (
            token_hash TEXT COLLATE "C" PRIMARY KEY,
            expires_at DOUBLE PRECISION NOT NULL
        );
        CREATE INDEX revoked_tokens_expiry ON revoked_tokens (expires_at);
        """,
        additive=True,
    ),
    # 7: who a principal key stands for (subject, records tenant), shown to the operator beside the
    # name an agent gave itself (issue 27, N8)
    Migration(
        """
        CREATE TABLE principals (
            principal TEXT COLLATE "C" PRIMARY KEY,
            subject TEXT NOT NULL,
            tenant TEXT,
            seen_at DOUBLE PRECISION NOT NULL
        );
        """,
        additive=True,
    ),
    # 8: an export's NDJSON in parts, each written in a short transaction of its own and read
    # back one part at a time (docs/executions.md, "Exports"); `executions.output` is read only for
    # exports completed before this migration
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
    ),
)


async def migrate(connection: asyncpg.Connection) -> int:
    """Apply the migrations the database lacks; return the schema version it is at.

    A database a newer release migrated further is used as it is when every migration this release
    does not know was additive, and refused with `SchemaTooNew`, untouched, otherwise
    (store/migration.py).
    """
    async with connection.transaction():
        await connection.execute("SELECT pg_advisory_xact_lock($1)", MIGRATION_LOCK)
        await connection.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        # Added by the release that introduced the compatibility rule; NULL in the rows before it.
        await connection.execute("ALTER TABLE schema_version ADD COLUMN IF NOT EXISTS compatible_from INTEGER")
        row = await connection.fetchrow(
            "SELECT version, compatible_from FROM schema_version ORDER BY version DESC LIMIT 1"
        )
        current, needs = (row["version"], row["compatible_from"]) if row is not None else (0, 0)
        check_compatible(found=current, needs=needs, known=len(MIGRATIONS))
        for version, migration in enumerate(MIGRATIONS[current:], start=current + 1):
            await connection.execute(migration.script)
            await connection.execute(
                "INSERT INTO schema_version (version, compatible_from) VALUES ($1, $2)",
                version,
                compatible_from(MIGRATIONS, version),
            )
    return max(current, len(MIGRATIONS))
