"""`Store` on a SQLite file in the state directory: the embedded default, one replica.

Sessions and the SSE event log live here, and the core's facets (`confirmations`, `revocations`,
`principals`, `tasks`, `audit`) on the same engine, with those of the plugins' own tables (`tables`). Each
method is one call on the engine's threads (engine.py), writes in one transaction.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from aql_mcp.exceptions import UpstreamUnavailable
from aql_mcp.store.base import PROBE_SECONDS, SessionAdmission, SessionRecord, StoredEvent, StreamOrigin
from aql_mcp.store.fair_share import TENANT_SHARE
from aql_mcp.store.plugin_tables import DeclaredTables, F, Tables
from aql_mcp.store.sqlite.audit import SqliteAuditStore
from aql_mcp.store.sqlite.bus import LocalBus
from aql_mcp.store.sqlite.confirmations import SqliteConfirmationStore
from aql_mcp.store.sqlite.engine import WAL_LIMIT_BYTES, SqliteEngine
from aql_mcp.store.sqlite.principals import SqlitePrincipalDirectory
from aql_mcp.store.sqlite.revocations import SqliteRevocationStore
from aql_mcp.store.sqlite.tasks import SqliteTaskStore

# The one replica's row in `replicas`, which the write probe rewrites.
REPLICA = "sqlite"
# Below this much free space the probe fails even if its own small write still fits (into log space
# a failed write left behind): the next record or checkpoint would not.
MIN_FREE_BYTES = 1024 * 1024
PROBE = "INSERT INTO replicas VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET seen_at = excluded.seen_at"


class SqliteStore:
    """Sessions and events on SQLite; the facets, the core's and the plugins', share its engine."""

    def __init__(
        self,
        path: Path,
        *,
        readers: int = 4,
        lock_timeout: float = 2.0,
        wal_limit_bytes: int = WAL_LIMIT_BYTES,
        tenant_share: float = TENANT_SHARE,
        scans: int = 4,
    ) -> None:
        self.engine = SqliteEngine(
            path,
            readers=readers,
            lock_timeout=lock_timeout,
            wal_limit_bytes=wal_limit_bytes,
            share=tenant_share,
            scans=scans,
        )
        self.confirmations = SqliteConfirmationStore(self.engine)
        self.revocations = SqliteRevocationStore(self.engine)
        self.principals = SqlitePrincipalDirectory(self.engine)
        self.tasks = SqliteTaskStore(self.engine)
        self.audit = SqliteAuditStore(self.engine, REPLICA)
        self.bus = LocalBus()
        self._plugins = DeclaredTables(lambda tables: tables.on_sqlite(self.engine))

    def tables(self, declared: Tables[F]) -> F:
        return self._plugins.facet(declared)

    async def open(self) -> None:
        await self.engine.open(self._plugins.seal())

    async def close(self) -> None:
        await self.audit.writers.drain()
        await self.engine.close()

    async def is_ready(self) -> bool:
        try:
            return bool(await self.engine.read(lambda db: db.execute("SELECT 1").fetchone()[0]))
        except Exception:
            return False

    async def is_writable(self) -> bool:
        """One tiny committed write, through the writer thread like any other: a full disk, a
        read-only file or another process's lock makes it fail within `PROBE_SECONDS`."""
        if _free_bytes(self.engine.path.parent) < MIN_FREE_BYTES:
            return False
        probe = self.engine.write(lambda db: db.execute(PROBE, (REPLICA, time.time())), lock_timeout=PROBE_SECONDS)
        try:
            await asyncio.wait_for(probe, PROBE_SECONDS)
        except (UpstreamUnavailable, TimeoutError):
            return False
        return True

    async def create_session(self, record: SessionRecord, *, max_open: int, max_per_owner: int) -> SessionAdmission:
        row = (
            record.id,
            record.owner,
            record.protocol_version,
            orjson.dumps(record.client_info),
            orjson.dumps(record.client_capabilities),
            record.log_level,
            record.created_at,
            record.last_seen,
        )

        def admit(db: sqlite3.Connection) -> SessionAdmission:
            # Counted and inserted in one IMMEDIATE transaction: no other writer can slip in between.
            if (
                db.execute("SELECT count(*) FROM sessions WHERE owner = ?", (record.owner,)).fetchone()[0]
                >= max_per_owner
            ):
                return "owner_full"
            if db.execute("SELECT count(*) FROM sessions").fetchone()[0] >= max_open:
                return "table_full"
            db.execute("INSERT INTO sessions VALUES (?, ?, ?, ?, ?, ?, ?, ?)", row)
            return "created"

        return await self.engine.write(admit)

    async def get_session(self, session_id: str) -> SessionRecord | None:
        row = await self.engine.read(
            lambda db: db.execute("SELECT * FROM sessions WHERE id = ?", (session_id,)).fetchone()
        )
        return None if row is None else _session_record(row)

    async def touch_session(self, session_id: str, now: float) -> None:
        await self.engine.write(
            lambda db: db.execute("UPDATE sessions SET last_seen = max(last_seen, ?) WHERE id = ?", (now, session_id))
        )

    async def set_log_level(self, session_id: str, level: str) -> None:
        await self.engine.write(
            lambda db: db.execute("UPDATE sessions SET log_level = ? WHERE id = ?", (level, session_id))
        )

    async def delete_session(self, session_id: str) -> bool:
        def delete(db: sqlite3.Connection) -> bool:
            _forget_streams(db, [session_id])
            return db.execute("DELETE FROM sessions WHERE id = ?", (session_id,)).rowcount == 1

        return await self.engine.write(delete)

    async def expire_sessions(self, idle_before: float) -> list[str]:
        return [record.id for record in await self.expire_session_records(idle_before)]

    async def expire_session_records(self, idle_before: float) -> list[SessionRecord]:
        def expire(db: sqlite3.Connection) -> list[SessionRecord]:
            rows = db.execute("SELECT * FROM sessions WHERE last_seen < ?", (idle_before,)).fetchall()
            ids = [row[0] for row in rows]
            _forget_streams(db, ids)
            db.executemany("DELETE FROM sessions WHERE id = ?", [(i,) for i in ids])
            return [_session_record(row) for row in rows]

        return await self.engine.write(expire)

    async def count_sessions(self, owner: str | None = None) -> int:
        if owner is None:
            return int(await self.engine.read(lambda db: db.execute("SELECT count(*) FROM sessions").fetchone()[0]))
        return int(
            await self.engine.read(
                lambda db: db.execute("SELECT count(*) FROM sessions WHERE owner = ?", (owner,)).fetchone()[0]
            )
        )

    async def append_event(
        self, session_id: str, stream_id: str, data: bytes, now: float, *, final: bool = False, request: str = ""
    ) -> int:
        def append(db: sqlite3.Connection) -> int:
            seq = int(
                db.execute(
                    "INSERT INTO streams VALUES (?, ?, 1, ?) ON CONFLICT (session_id, stream_id) "
                    "DO UPDATE SET last_seq = last_seq + 1, ended = max(ended, excluded.ended) RETURNING last_seq",
                    (session_id, stream_id, int(final)),
                ).fetchone()[0]
            )
            db.execute("INSERT INTO events VALUES (?, ?, ?, ?, ?)", (session_id, stream_id, seq, data, now))
            return seq

        return await self.engine.write(append)

    async def events_after(self, session_id: str, stream_id: str, seq: int) -> list[StoredEvent]:
        rows = await self.engine.read(
            lambda db: db.execute(
                "SELECT seq, data FROM events WHERE session_id = ? AND stream_id = ? AND seq > ? ORDER BY seq",
                (session_id, stream_id, seq),
            ).fetchall()
        )
        return [StoredEvent(seq=r[0], data=r[1]) for r in rows]

    async def end_stream(self, session_id: str, stream_id: str) -> None:
        end = "INSERT INTO streams VALUES (?, ?, 0, 1) ON CONFLICT (session_id, stream_id) DO UPDATE SET ended = 1"
        await self.engine.write(lambda db: db.execute(end, (session_id, stream_id)))

    async def stream_origin(self, session_id: str, stream_id: str) -> StreamOrigin | None:
        # One replica: whatever runs a stream's request runs here (or ran before a restart).
        return None

    async def stream_position(self, session_id: str, stream_id: str) -> tuple[int, bool]:
        row = await self.engine.read(
            lambda db: db.execute(
                "SELECT last_seq, ended FROM streams WHERE session_id = ? AND stream_id = ?", (session_id, stream_id)
            ).fetchone()
        )
        return (int(row[0]), bool(row[1])) if row else (0, False)

    async def subscribe(self, session_id: str, uri: str) -> None:
        insert = "INSERT INTO subscriptions VALUES (?, ?) ON CONFLICT DO NOTHING"
        await self.engine.write(lambda db: db.execute(insert, (uri, session_id)))

    async def unsubscribe(self, session_id: str, uri: str) -> None:
        delete = "DELETE FROM subscriptions WHERE uri = ? AND session_id = ?"
        await self.engine.write(lambda db: db.execute(delete, (uri, session_id)))

    async def subscribers(self, uri: str) -> list[str]:
        rows = await self.engine.read(
            lambda db: db.execute("SELECT session_id FROM subscriptions WHERE uri = ?", (uri,)).fetchall()
        )
        return [row[0] for row in rows]

    async def purge_events(self, before: float) -> int:
        return await self.engine.write(
            lambda db: db.execute("DELETE FROM events WHERE created_at < ?", (before,)).rowcount
        )


def _free_bytes(directory: Path) -> int:
    """What an unprivileged writer may still use on the volume holding the file."""
    try:
        found = os.statvfs(directory)
    except OSError:
        return 0
    return found.f_bavail * found.f_frsize


def _forget_streams(db: sqlite3.Connection, session_ids: list[str]) -> None:
    db.executemany("DELETE FROM events WHERE session_id = ?", [(i,) for i in session_ids])
    db.executemany("DELETE FROM streams WHERE session_id = ?", [(i,) for i in session_ids])
    db.executemany("DELETE FROM subscriptions WHERE session_id = ?", [(i,) for i in session_ids])


def _session_record(row: Sequence[Any]) -> SessionRecord:
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
