"""The SQLite schema: numbered migrations, each applied in one transaction and recorded in
`schema_version`, so a store written by an older release is upgraded in place at startup; then the
plugins' own migrations (store/plugin_tables.py), each plugin's recorded in `plugin_schema`.

The core keeps the numbers of release 0.2.0's migrations: those that created a plugin's tables keep
only their core part (nothing, for some), the plugin's own migrations took over the rest.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence

from aql_mcp.store.migration import Migration, PluginSchema, adopted, check_compatible, compatible_from

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
    # 3: (release 0.2.0: the records plugin's tables, now its own migration 1, plugins/records/tables.py)
    Migration("", additive=True),
    # 4: confirmation tokens of the MCP-AQL gatekeeper, by the SHA-256 of the token (never the token
    # itself); (release 0.2.0: also the records plugin's migration 2)
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
        """,
        additive=True,
    ),
    # 5: store engines (docs/store.md): each stream numbers its own events, surviving the purge of
    # old ones; resource subscriptions are kept with the session. (Release 0.2.0: also the records
    # plugin's breaking migration 3, which made this one breaking; it stays so, as stores recorded it.)
    Migration(
        """
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
    # 8: (release 0.2.0: the executions plugin's migration 1, plugins/executions/tables.py)
    Migration("", additive=True),
    # 9: (release 0.2.0: the safety plugin's migration 1, plugins/safety/tables.py)
    Migration("", additive=True),
    # 10: (release 0.2.0: the executions plugin's migration 2)
    Migration("", additive=True),
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
    # 13: (the executions plugin's migration 3)
    Migration("", additive=True),
    # 14: plugins own their tables (store/plugin_tables.py): each plugin's version, and the core
    # version a store written before this migration was found at, which tells what it already holds
    Migration(
        """
        CREATE TABLE plugin_schema (
            plugin TEXT NOT NULL,
            version INTEGER NOT NULL,
            compatible_from INTEGER NOT NULL,
            PRIMARY KEY (plugin, version)
        ) WITHOUT ROWID;
        CREATE TABLE schema_legacy (
            version INTEGER NOT NULL
        );
        """,
        additive=True,
    ),
    # 15: the audit trail (store/audit.py, docs/audit.md): records in hash chains, one chain per
    # replica and UTC day, and the checkpoints anchoring and pruning them. Append-only by triggers: a
    # record is deleted only under a `prune` checkpoint of its chain, a checkpoint never.
    Migration(
        """
        CREATE TABLE audit_records (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            chain TEXT NOT NULL,
            seq INTEGER NOT NULL,
            recorded_at TEXT NOT NULL,
            replica TEXT NOT NULL,
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
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            chain TEXT NOT NULL,
            seq INTEGER NOT NULL,
            hash TEXT NOT NULL,
            reason TEXT NOT NULL,
            recorded_at TEXT NOT NULL,
            pruned_before TEXT
        );
        CREATE INDEX audit_checkpoints_chain ON audit_checkpoints (chain, seq);
        CREATE TRIGGER audit_records_no_update BEFORE UPDATE ON audit_records
        BEGIN
            SELECT RAISE(ABORT, 'audit records are append-only');
        END;
        CREATE TRIGGER audit_records_no_delete BEFORE DELETE ON audit_records
        WHEN NOT EXISTS (
            SELECT 1 FROM audit_checkpoints
            WHERE chain = OLD.chain AND reason = 'prune' AND seq >= OLD.seq
        )
        BEGIN
            SELECT RAISE(ABORT, 'audit records are append-only: only a prune checkpoint releases them');
        END;
        CREATE TRIGGER audit_checkpoints_no_update BEFORE UPDATE ON audit_checkpoints
        BEGIN
            SELECT RAISE(ABORT, 'audit checkpoints are append-only');
        END;
        CREATE TRIGGER audit_checkpoints_no_delete BEFORE DELETE ON audit_checkpoints
        BEGIN
            SELECT RAISE(ABORT, 'audit checkpoints are append-only');
        END;
        """,
        additive=True,
    ),
    # 16: task leases (store/tasks.py, docs/eras.md "Tasks"): the replica running a task and when its
    # lease ends; a live task whose lease ran out is failed by another replica. No row: never leased.
    # A table of its own, so the rows a release before it wrote stay as they were.
    Migration(
        """
        CREATE TABLE task_leases (
            task_id TEXT PRIMARY KEY REFERENCES tasks (id) ON DELETE CASCADE,
            replica TEXT NOT NULL,
            lease_until REAL NOT NULL
        ) WITHOUT ROWID;
        CREATE INDEX task_leases_until ON task_leases (lease_until);
        """,
        additive=True,
    ),
)
# The first core migration after which the plugins' tables are theirs: a store found below it
# holds release 0.2.0's schema.
PLUGIN_SCHEMA = 14


def migrate(db: sqlite3.Connection, plugins: Sequence[PluginSchema] = ()) -> int:
    """Apply the migrations this file lacks, the core's then each plugin's; return the core's
    schema version.

    A file a newer release migrated further is used as it is when every migration this release does
    not know was additive, and refused with `SchemaTooNew`, untouched, otherwise
    (store/migration.py); the same holds for each plugin's tables.

    Run on the writer connection before any other statement; its IMMEDIATE transaction also keeps a
    second process starting on the same file from applying the same migration twice.
    """
    db.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
    db.execute("BEGIN IMMEDIATE")
    try:
        current = _migrate_core(db)
        for tables in plugins:
            _migrate_plugin(db, tables.name, tables.sqlite)
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
    return max(current, len(MIGRATIONS))


def _migrate_core(db: sqlite3.Connection) -> int:
    current, needs = _stored_version(db)
    check_compatible(found=current, needs=needs, known=len(MIGRATIONS))
    for version, migration in enumerate(MIGRATIONS[current:], start=current + 1):
        _run(db, migration.script)
        db.execute(
            "INSERT INTO schema_version (version, compatible_from) VALUES (?, ?)",
            (version, compatible_from(MIGRATIONS, version)),
        )
    if 0 < current < PLUGIN_SCHEMA:
        db.execute("INSERT INTO schema_legacy (version) VALUES (?)", (current,))
    return current


def _migrate_plugin(db: sqlite3.Connection, name: str, migrations: Sequence[Migration]) -> None:
    """One plugin's migrations from where its tables are; a plugin new to a store of release 0.2.0
    first records the migrations that release applied as core ones (store/plugin_tables.py)."""
    row = db.execute(
        "SELECT version, compatible_from FROM plugin_schema WHERE plugin = ? ORDER BY version DESC LIMIT 1", (name,)
    ).fetchone()
    if row is None:
        legacy = db.execute("SELECT max(version) FROM schema_legacy").fetchone()[0] or 0
        current = adopted(migrations, legacy)
        _record_plugin(db, name, migrations, range(1, current + 1))
    else:
        current = row[0]
        check_compatible(found=current, needs=row[1], known=len(migrations), part=f"plugin {name!r}'s tables")
    for version in range(current + 1, len(migrations) + 1):
        _run(db, migrations[version - 1].script)
        _record_plugin(db, name, migrations, [version])


def _record_plugin(db: sqlite3.Connection, name: str, migrations: Sequence[Migration], versions: Iterable[int]) -> None:
    db.executemany(
        "INSERT INTO plugin_schema (plugin, version, compatible_from) VALUES (?, ?, ?)",
        [(name, version, compatible_from(migrations, version)) for version in versions],
    )


def _run(db: sqlite3.Connection, script: str) -> None:
    """Each statement of `script` in turn. A trigger's body holds `;` of its own, so a statement
    ends at the first `;` after which SQLite finds it complete."""
    statement = ""
    for piece in script.split(";"):
        statement += piece + ";"
        if sqlite3.complete_statement(statement):
            if statement.strip(" \n;"):
                db.execute(statement)
            statement = ""


def _stored_version(db: sqlite3.Connection) -> tuple[int, int | None]:
    """The file's schema version and its `compatible_from` (None in rows written before the column)."""
    columns = {row[1] for row in db.execute("PRAGMA table_info(schema_version)")}
    if "compatible_from" not in columns:
        db.execute("ALTER TABLE schema_version ADD COLUMN compatible_from INTEGER")
    row = db.execute("SELECT version, compatible_from FROM schema_version ORDER BY version DESC LIMIT 1").fetchone()
    return (row[0], row[1]) if row is not None else (0, 0)
