"""The embedded store: SQLite through the standard library, one writer, WAL journal.

Schema changes are numbered migrations applied in order inside one transaction each and
recorded in `schema_version`, so a store written by an older release is upgraded in place.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson
import structlog

from aql_mcp.exceptions import StoreError, UpstreamUnavailable
from aql_mcp.store.base import SessionRecord, StoredEvent
from aql_mcp.store.confirmations import SqliteConfirmationStore
from aql_mcp.store.records import SqliteRecordStore

log = structlog.get_logger("aql_mcp.store")

MIGRATIONS: tuple[str, ...] = (
    # 1: sessions and the SSE event log (resumability, MCP 2025-11-25 transports)
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
    # 2: sessions per owner are capped (corporate §14), so they are counted by owner
    """
    CREATE INDEX sessions_owner ON sessions (owner);
    """,
    # 3: the `records` plugin: collections and JSON records per tenant, usage for quotas, and the
    # idempotency keys of create_record (store/records.py)
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
    # 4: confirmation tokens of the MCP-AQL gatekeeper, by the SHA-256 of the token (never the token
    # itself), and the index that lets housekeeping drop old idempotency keys
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
)


class SqliteStore:
    """`Store` on a SQLite file in the state directory; `records` and `confirmations` share its connection."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._db: sqlite3.Connection | None = None
        self.records = SqliteRecordStore(self)
        self.confirmations = SqliteConfirmationStore(self)

    @property
    def db(self) -> sqlite3.Connection:
        if self._db is None:
            raise UpstreamUnavailable("Service unavailable: the store is not open")
        return self._db

    @contextmanager
    def guard(self) -> Iterator[sqlite3.Connection]:
        """The connection, with SQLite's errors translated where they enter (no SQL on the wire)."""
        try:
            yield self.db
        except sqlite3.Error as exc:
            log.error("store_error", error=type(exc).__name__, detail=str(exc))
            raise StoreError() from exc

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One IMMEDIATE transaction: committed on success, rolled back on any exception.

        IMMEDIATE takes the write lock at the start, so the reads a write depends on (a quota, an
        `_etag`, an unconsumed token) cannot change before it commits.
        """
        with self.guard() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    async def open(self) -> None:
        self._path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("PRAGMA foreign_keys=ON")
        db.execute("PRAGMA busy_timeout=5000")
        migrate(db)
        self._db = db

    async def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    async def is_ready(self) -> bool:
        try:
            self.db.execute("SELECT 1").fetchone()
        except (sqlite3.Error, UpstreamUnavailable):
            return False
        return True

    async def create_session(self, record: SessionRecord, *, max_open: int) -> bool:
        with self.guard() as db:
            # One statement, so the cap check and the insert cannot interleave with another writer.
            cursor = db.execute(
                "INSERT INTO sessions SELECT ?, ?, ?, ?, ?, ?, ?, ? WHERE (SELECT count(*) FROM sessions) < ?",
                (
                    record.id,
                    record.owner,
                    record.protocol_version,
                    orjson.dumps(record.client_info),
                    orjson.dumps(record.client_capabilities),
                    record.log_level,
                    record.created_at,
                    record.last_seen,
                    max_open,
                ),
            )
            return cursor.rowcount == 1

    async def get_session(self, session_id: str) -> SessionRecord | None:
        with self.guard() as db:
            row = db.execute("SELECT * FROM sessions WHERE id = ?", (session_id,)).fetchone()
            if row is None:
                return None
            return SessionRecord(
                id=row[0],
                owner=row[1],
                protocol_version=row[2],
                client_info=orjson.loads(row[3]),
                client_capabilities=orjson.loads(row[4]),
                log_level=row[5],
                created_at=row[6],
                last_seen=row[7],
            )

    async def touch_session(self, session_id: str, now: float) -> None:
        with self.guard() as db:
            db.execute("UPDATE sessions SET last_seen = ? WHERE id = ?", (now, session_id))

    async def set_log_level(self, session_id: str, level: str) -> None:
        with self.guard() as db:
            db.execute("UPDATE sessions SET log_level = ? WHERE id = ?", (level, session_id))

    async def delete_session(self, session_id: str) -> bool:
        with self.transaction() as db:
            db.execute("DELETE FROM events WHERE session_id = ?", (session_id,))
            cursor = db.execute("DELETE FROM sessions WHERE id = ?", (session_id,))
        return cursor.rowcount == 1

    async def expire_sessions(self, idle_before: float) -> list[str]:
        with self.transaction() as db:
            ids = [r[0] for r in db.execute("SELECT id FROM sessions WHERE last_seen < ?", (idle_before,))]
            db.executemany("DELETE FROM events WHERE session_id = ?", [(i,) for i in ids])
            db.executemany("DELETE FROM sessions WHERE id = ?", [(i,) for i in ids])
        return ids

    async def count_sessions(self, owner: str | None = None) -> int:
        with self.guard() as db:
            if owner is None:
                return int(db.execute("SELECT count(*) FROM sessions").fetchone()[0])
            return int(db.execute("SELECT count(*) FROM sessions WHERE owner = ?", (owner,)).fetchone()[0])

    async def append_event(self, session_id: str, stream_id: str, seq: int, data: bytes, now: float) -> None:
        with self.guard() as db:
            db.execute("INSERT OR REPLACE INTO events VALUES (?, ?, ?, ?, ?)", (session_id, stream_id, seq, data, now))

    async def events_after(self, session_id: str, stream_id: str, seq: int) -> list[StoredEvent]:
        with self.guard() as db:
            rows = db.execute(
                "SELECT seq, data FROM events WHERE session_id = ? AND stream_id = ? AND seq > ? ORDER BY seq",
                (session_id, stream_id, seq),
            )
            return [StoredEvent(seq=r[0], data=r[1]) for r in rows]

    async def purge_events(self, before: float) -> int:
        with self.guard() as db:
            return db.execute("DELETE FROM events WHERE created_at < ?", (before,)).rowcount


def migrate(db: sqlite3.Connection) -> int:
    """Apply the migrations this file is newer by; return the schema version reached."""
    db.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
    row = db.execute("SELECT max(version) FROM schema_version").fetchone()
    current = row[0] or 0
    for version, script in enumerate(MIGRATIONS[current:], start=current + 1):
        statements = [s for s in script.split(";") if s.strip()]
        with db:
            db.execute("BEGIN")
            for statement in statements:
                db.execute(statement)
            db.execute("INSERT INTO schema_version VALUES (?)", (version,))
    return len(MIGRATIONS)
