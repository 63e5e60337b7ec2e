"""The PostgreSQL schema: numbered migrations applied at startup under an advisory lock.

Every replica runs `migrate` when it starts. The transaction-scoped advisory lock makes replicas
starting together take turns: the first applies what is missing, the others then find nothing to do.
Text columns that are compared or sorted use the "C" collation, so they order by code point, as
SQLite does and as the listing rules say (docs/store.md). The plugins' own migrations follow the
core's in the same transaction (store/plugin_tables.py), each plugin's recorded in `plugin_schema`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import asyncpg

from aql_mcp.store.migration import Migration, PluginSchema, adopted, check_compatible, compatible_from

# pg_advisory_xact_lock key of the migrations: any constant, the same in every release.
MIGRATION_LOCK = 0x61716C6D6370  # "aqlmcp"

# `additive`: whether the release before a migration still runs on the schema it leaves (store/migration.py).
MIGRATIONS: tuple[Migration, ...] = (
    # 1 is the base of the schema: no release before it.
    # 1: sessions, the SSE event log and its per-stream counters, resource subscriptions,
    # confirmation tokens (the SQLite schema at its version 5), and the bus: signals and replicas.
    # (Release 0.2.0: also the records plugin's migration 1, plugins/records/tables.py.)
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
    # 3: (release 0.2.0: the executions plugin's migration 1, plugins/executions/tables.py)
    Migration("", additive=True),
    # 4: (release 0.2.0: the safety plugin's migration 1, plugins/safety/tables.py)
    Migration("", additive=True),
    # 5: (release 0.2.0: the executions plugin's migration 2)
    Migration("", additive=True),
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
    # 8: (the executions plugin's migration 3)
    Migration("", additive=True),
    # 9: plugins own their tables (store/plugin_tables.py): each plugin's version, and the core
    # version a database written before this migration was found at, which tells what it already holds
    Migration(
        """
        CREATE TABLE plugin_schema (
            plugin TEXT COLLATE "C" NOT NULL,
            version INTEGER NOT NULL,
            compatible_from INTEGER NOT NULL,
            PRIMARY KEY (plugin, version)
        );
        CREATE TABLE schema_legacy (
            version INTEGER NOT NULL
        );
        """,
        additive=True,
    ),
    # 10: the audit trail (store/audit.py, docs/audit.md): records in hash chains, one chain per
    # replica and UTC day, and the checkpoints anchoring and pruning them. Append-only by triggers,
    # whatever the role: a record is deleted only under a `prune` checkpoint of its chain, a
    # checkpoint never, neither table truncated. The grants that keep the service's own role to
    # INSERT and SELECT are the operator's (docs/audit.md, "PostgreSQL roles").
    Migration(
        """
        CREATE TABLE audit_records (
            id BIGSERIAL PRIMARY KEY,
            chain TEXT COLLATE "C" NOT NULL,
            seq BIGINT NOT NULL,
            recorded_at TEXT COLLATE "C" NOT NULL,
            replica TEXT COLLATE "C" NOT NULL,
            request_id TEXT,
            trace_id TEXT,
            subject TEXT NOT NULL,
            actors TEXT NOT NULL,
            tenant TEXT,
            era TEXT,
            tool TEXT,
            operation TEXT NOT NULL,
            kind TEXT NOT NULL,
            outcome TEXT NOT NULL,
            code TEXT,
            params_digest TEXT,
            resource_id TEXT,
            prev_hash TEXT NOT NULL,
            hash TEXT NOT NULL,
            UNIQUE (chain, seq)
        );
        CREATE INDEX audit_records_time ON audit_records (recorded_at);
        CREATE INDEX audit_records_replica ON audit_records (replica, id);
        CREATE TABLE audit_checkpoints (
            id BIGSERIAL PRIMARY KEY,
            chain TEXT COLLATE "C" NOT NULL,
            seq BIGINT NOT NULL,
            hash TEXT NOT NULL,
            reason TEXT NOT NULL,
            recorded_at TEXT COLLATE "C" NOT NULL,
            pruned_before TEXT COLLATE "C"
        );
        CREATE INDEX audit_checkpoints_chain ON audit_checkpoints (chain, seq);
        CREATE FUNCTION audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_OP = 'DELETE' AND TG_TABLE_NAME = 'audit_records' AND EXISTS (
                SELECT 1 FROM audit_checkpoints c
                WHERE c.chain = OLD.chain AND c.reason = 'prune' AND c.seq >= OLD.seq
            ) THEN
                RETURN OLD;
            END IF;
            RAISE EXCEPTION 'the audit trail is append-only (% on %)', TG_OP, TG_TABLE_NAME
                USING ERRCODE = 'insufficient_privilege';
        END
        $$;
        CREATE TRIGGER audit_records_append_only BEFORE UPDATE OR DELETE ON audit_records
            FOR EACH ROW EXECUTE FUNCTION audit_append_only();
        CREATE TRIGGER audit_records_no_truncate BEFORE TRUNCATE ON audit_records
            FOR EACH STATEMENT EXECUTE FUNCTION audit_append_only();
        CREATE TRIGGER audit_checkpoints_append_only BEFORE UPDATE OR DELETE ON audit_checkpoints
            FOR EACH ROW EXECUTE FUNCTION audit_append_only();
        CREATE TRIGGER audit_checkpoints_no_truncate BEFORE TRUNCATE ON audit_checkpoints
            FOR EACH STATEMENT EXECUTE FUNCTION audit_append_only();
        """,
        additive=True,
    ),
    # 11: which replica writes a stream and which request it answers (store/base.py `stream_origin`):
    # a replica following a POST stream ends it once that replica is gone (docs/connections.md)
    Migration(
        """
        CREATE TABLE stream_origins (
            session_id TEXT COLLATE "C" NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            stream_id TEXT COLLATE "C" NOT NULL,
            origin TEXT NOT NULL,
            request TEXT NOT NULL,
            PRIMARY KEY (session_id, stream_id)
        );
        """,
        additive=True,
    ),
    # 12: task leases, as on SQLite (database clock)
    Migration(
        """
        CREATE TABLE task_leases (
            task_id TEXT COLLATE "C" PRIMARY KEY REFERENCES tasks (id) ON DELETE CASCADE,
            replica TEXT COLLATE "C" NOT NULL,
            lease_until DOUBLE PRECISION NOT NULL
        );
        CREATE INDEX task_leases_until ON task_leases (lease_until);
        """,
        additive=True,
    ),
)
# The first core migration after which the plugins' tables are theirs: a database found below it
# holds release 0.2.0's schema.
PLUGIN_SCHEMA = 9


async def migrate(connection: asyncpg.Connection, plugins: Sequence[PluginSchema] = ()) -> int:
    """Apply the migrations the database lacks, the core's then each plugin's; return the core's
    schema version.

    A database a newer release migrated further is used as it is when every migration this release
    does not know was additive, and refused with `SchemaTooNew`, untouched, otherwise
    (store/migration.py); the same holds for each plugin's tables. One transaction under the
    advisory lock: replicas starting together apply each migration once.
    """
    async with connection.transaction():
        await connection.execute("SELECT pg_advisory_xact_lock($1)", MIGRATION_LOCK)
        current = await _migrate_core(connection)
        for tables in plugins:
            await _migrate_plugin(connection, tables.name, tables.postgres)
    return max(current, len(MIGRATIONS))


async def _migrate_core(connection: asyncpg.Connection) -> int:
    await connection.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
    # Added by the release that introduced the compatibility rule; NULL in the rows before it.
    await connection.execute("ALTER TABLE schema_version ADD COLUMN IF NOT EXISTS compatible_from INTEGER")
    row = await connection.fetchrow("SELECT version, compatible_from FROM schema_version ORDER BY version DESC LIMIT 1")
    current, needs = (row["version"], row["compatible_from"]) if row is not None else (0, 0)
    check_compatible(found=current, needs=needs, known=len(MIGRATIONS))
    for version, migration in enumerate(MIGRATIONS[current:], start=current + 1):
        if migration.script.strip():
            await connection.execute(migration.script)
        await connection.execute(
            "INSERT INTO schema_version (version, compatible_from) VALUES ($1, $2)",
            version,
            compatible_from(MIGRATIONS, version),
        )
    if 0 < current < PLUGIN_SCHEMA:
        await connection.execute("INSERT INTO schema_legacy (version) VALUES ($1)", current)
    return int(current)


async def _migrate_plugin(connection: asyncpg.Connection, name: str, migrations: Sequence[Migration]) -> None:
    """One plugin's migrations from where its tables are; a plugin new to a database of release
    0.2.0 first records the migrations that release applied as core ones (store/plugin_tables.py)."""
    row = await connection.fetchrow(
        "SELECT version, compatible_from FROM plugin_schema WHERE plugin = $1 ORDER BY version DESC LIMIT 1", name
    )
    if row is None:
        legacy = await connection.fetchval("SELECT max(version) FROM schema_legacy") or 0
        current = adopted(migrations, legacy)
        await _record_plugin(connection, name, migrations, range(1, current + 1))
    else:
        current = row["version"]
        check_compatible(
            found=current, needs=row["compatible_from"], known=len(migrations), part=f"plugin {name!r}'s tables"
        )
    for version in range(current + 1, len(migrations) + 1):
        await connection.execute(migrations[version - 1].script)
        await _record_plugin(connection, name, migrations, [version])


async def _record_plugin(
    connection: asyncpg.Connection, name: str, migrations: Sequence[Migration], versions: Iterable[int]
) -> None:
    await connection.executemany(
        "INSERT INTO plugin_schema (plugin, version, compatible_from) VALUES ($1, $2, $3)",
        [(name, version, compatible_from(migrations, version)) for version in versions],
    )
