"""The SQLite schema: numbered migrations, each applied in one transaction and recorded in
`schema_version`, so a store written by an older release is upgraded in place at startup.
"""

from __future__ import annotations

import sqlite3

from aql_mcp.store.migration import Migration, check_compatible, compatible_from

# `additive`: whether the release before a migration still runs on the schema it leaves (store/migration.py).
MIGRATIONS: tuple[Migration, ...] = (
    # 1 is the base of the schema: no release before it.
    # 1: sessions and the SSE event log (resumability, MCP 2025-11-25 transports)
    Migration(
        """
        CREATE TABLE sessions (
            id TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            protocol_version TEXT NOT NULL,
            client_info BLOB NOT NULL,
            client_capabilities BLOB NOT NULL,
            log_level TEXT NOT NULL,
            created_at REAL NOT NULL,
            last_seen REAL NOT NULL
        );
        CREATE INDEX sessions_last_seen ON sessions (last_seen);
        CREATE TABLE events (
            session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            stream_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            data BLOB NOT NULL,
            created_at REAL NOT NULL,
            PRIMARY KEY (session_id, stream_id, seq)
        ) WITHOUT ROWID;
        CREATE INDEX events_created_at ON events (created_at);
        """,
        additive=False,
    ),
    # 2: sessions per owner are capped (corporate §14), so they are counted by owner
    Migration(
        """
        CREATE INDEX sessions_owner ON sessions (owner);
        """,
        additive=True,
    ),
    # 3: the `records` plugin: collections and JSON records per tenant, usage for quotas, and the
    # idempotency keys of create_record (plugins/records/store.py)
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
        additive=True,
    ),
    # 4: confirmation tokens of the MCP-AQL gatekeeper, by the SHA-256 of the token (never the token
    # itself), and the index that lets housekeeping drop old idempotency keys
    Migration(
        """
        CREATE TABLE confirmations (
            token_hash TEXT PRIMARY KEY,
            operation TEXT NOT NULL,
            params_hash TEXT NOT NULL,
            principal TEXT NOT NULL,
            session TEXT NOT NULL,
            expires_at REAL NOT NULL,
            consumed_at REAL
        ) WITHOUT ROWID;
        CREATE INDEX confirmations_expiry ON confirmations (expires_at);
        CREATE INDEX record_idempotency_age ON record_idempotency (created_at);
        """,
        additive=True,
    ),
    # 5: store engines (docs/store.md): a record's position counts within its own collection, so a
    # cursor says nothing of other tenants' writes; collections keep their record count (a free
    # `totalCount`); each stream numbers its own events, surviving the purge of old ones; resource
    # subscriptions are kept with the session
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
        CREATE TABLE streams (
            session_id TEXT NOT NULL,
            stream_id TEXT NOT NULL,
            last_seq INTEGER NOT NULL,
            ended INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (session_id, stream_id)
        ) WITHOUT ROWID;
        INSERT INTO streams SELECT session_id, stream_id, max(seq), 0 FROM events GROUP BY session_id, stream_id;
        CREATE TABLE subscriptions (
            uri TEXT NOT NULL,
            session_id TEXT NOT NULL,
            PRIMARY KEY (uri, session_id)
        ) WITHOUT ROWID;
        CREATE INDEX subscriptions_session ON subscriptions (session_id);
        """,
        additive=False,
    ),
    # 6: the write probe of `/ready` (issue 12) rewrites this replica's row: a write that commits
    # proves the file can be written (not full, not read-only, the lock obtainable)
    Migration(
        """
        CREATE TABLE replicas (
            id TEXT PRIMARY KEY,
            seen_at REAL NOT NULL
        ) WITHOUT ROWID;
        """,
        additive=True,
    ),
    # 7: tasks of the io.modelcontextprotocol/tasks extension (store/tasks.py), counted per owner for
    # the cap on live tasks and deleted once expired
    Migration(
        """
        CREATE TABLE tasks (
            id TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            tool TEXT NOT NULL,
            status TEXT NOT NULL,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            expires_at REAL NOT NULL,
            ttl_ms INTEGER NOT NULL,
            poll_ms INTEGER NOT NULL,
            status_message TEXT,
            input_requests BLOB NOT NULL,
            answers BLOB NOT NULL,
            result BLOB,
            error BLOB
        ) WITHOUT ROWID;
        CREATE INDEX tasks_owner ON tasks (owner, status);
        CREATE INDEX tasks_expiry ON tasks (expires_at);
        """,
        additive=True,
    ),
    # 8: executions of the `executions` plugin (plugins/executions/store.py, MCP-AQL §8.4): the row is the
    # truth every replica reads; `payload` is kept only while a retry may need it
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
        additive=True,
    ),
    # 9: the execution safety loop (plugins/safety/store.py, docs/safety.md): monitored runs, out-of-band
    # challenges, hard blocks per principal (they outlive a restart, §8.8.3), approvals, pull-based
    # notices, failed verifications per principal (rate limit, §8.8.5) and the audit trail
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
        additive=True,
    ),
    # 10: the principal that started an execution: MCP 2025-11-25 tasks are bound to it (an
    # execution itself belongs to the records tenant), listed newest first by (created_at, id)
    Migration(
        """
        ALTER TABLE executions ADD COLUMN principal TEXT;
        CREATE INDEX executions_principal ON executions (owner, principal, created_at, id);
        """,
        additive=True,
    ),
    # 11: tokens the operator console signed out, by their SHA-256, until they expire (issue 27, N6)
    Migration(
        """
        CREATE TABLE revoked_tokens (
            token_hash TEXT PRIMARY KEY,
            expires_at REAL NOT NULL
        ) WITHOUT ROWID;
        CREATE INDEX revoked_tokens_expiry ON revoked_tokens (expires_at);
        """,
        additive=True,
    ),
    # 12: who a principal key stands for (subject, records tenant), shown to the operator beside the
    # name an agent gave itself (issue 27, N8)
    Migration(
        """
        CREATE TABLE principals (
            principal TEXT PRIMARY KEY,
            subject TEXT NOT NULL,
            tenant TEXT,
            seen_at REAL NOT NULL
        ) WITHOUT ROWID;
        """,
        additive=True,
    ),
    # 13: an export's NDJSON in parts, each written in a short transaction of its own and read
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
    ),
)


def migrate(db: sqlite3.Connection) -> int:
    """Apply the migrations this file lacks; return the schema version it is at.

    A file a newer release migrated further is used as it is when every migration this release does
    not know was additive, and refused with `SchemaTooNew`, untouched, otherwise
    (store/migration.py).

    Run on the writer connection before any other statement; its IMMEDIATE transaction also keeps a
    second process starting on the same file from applying the same migration twice.
    """
    db.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
    db.execute("BEGIN IMMEDIATE")
    try:
        current, needs = _stored_version(db)
        check_compatible(found=current, needs=needs, known=len(MIGRATIONS))
        for version, migration in enumerate(MIGRATIONS[current:], start=current + 1):
            for statement in (s for s in migration.script.split(";") if s.strip()):
                db.execute(statement)
            db.execute(
                "INSERT INTO schema_version (version, compatible_from) VALUES (?, ?)",
                (version, compatible_from(MIGRATIONS, version)),
            )
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
    return max(current, len(MIGRATIONS))


def _stored_version(db: sqlite3.Connection) -> tuple[int, int | None]:
    """The file's schema version and its `compatible_from` (None in rows written before the column)."""
    columns = {row[1] for row in db.execute("PRAGMA table_info(schema_version)")}
    if "compatible_from" not in columns:
        db.execute("ALTER TABLE schema_version ADD COLUMN compatible_from INTEGER")
    row = db.execute("SELECT version, compatible_from FROM schema_version ORDER BY version DESC LIMIT 1").fetchone()
    return (row[0], row[1]) if row is not None else (0, 0)
