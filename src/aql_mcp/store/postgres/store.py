"""`Store` on PostgreSQL: what several replicas share. Sessions, the event log, subscriptions; the
core's facets (`confirmations`, `revocations`, `principals`, `tasks`, `audit`), those of the plugins' own
tables (`tables`) and the cross-replica `bus` share the engine."""

from __future__ import annotations

import asyncio

import asyncpg
import orjson

from aql_mcp.exceptions import UpstreamUnavailable
from aql_mcp.store.base import PROBE_SECONDS, SessionAdmission, SessionRecord, StoredEvent, StreamOrigin
from aql_mcp.store.plugin_tables import DeclaredTables, F, Tables
from aql_mcp.store.postgres.audit import PostgresAuditStore
from aql_mcp.store.postgres.bus import BEAT, PostgresBus
from aql_mcp.store.postgres.confirmations import PostgresConfirmationStore
from aql_mcp.store.postgres.engine import PostgresEngine, PostgresOptions
from aql_mcp.store.postgres.principals import PostgresPrincipalDirectory
from aql_mcp.store.postgres.revocations import PostgresRevocationStore
from aql_mcp.store.postgres.tasks import PostgresTaskStore

READY_SECONDS = 1.0
# pg_advisory_xact_lock key of session admission: counting and inserting take turns across replicas.
ADMISSION_LOCK = 0x61716C736573  # "aqlses"
# The write probe: the bus's heartbeat writes the same row (database clock), so the probe adds no table.
PROBE = BEAT


class PostgresStore:
    """Sessions and events on PostgreSQL; the facets and the `bus` share its engine."""

    def __init__(self, options: PostgresOptions) -> None:
        self.engine = PostgresEngine(options)
        self.confirmations = PostgresConfirmationStore(self.engine)
        self.revocations = PostgresRevocationStore(self.engine)
        self.principals = PostgresPrincipalDirectory(self.engine)
        self.tasks = PostgresTaskStore(self.engine)
        self.audit = PostgresAuditStore(self.engine)
        self.bus = PostgresBus(self.engine)
        self._plugins = DeclaredTables(lambda tables: tables.on_postgres(self.engine))

    def tables(self, declared: Tables[F]) -> F:
        return self._plugins.facet(declared)

    async def open(self) -> None:
        await self.engine.open(self._plugins.seal())
        await self.bus.open()

    async def close(self) -> None:
        await self.audit.writers.drain()
        await self.bus.close()
        await self.engine.close()

    async def is_ready(self) -> bool:
        """A round trip within a second: a readiness probe must answer before its own timeout."""
        try:
            return bool(await asyncio.wait_for(self.engine.fetchval("SELECT 1"), READY_SECONDS))
        except Exception:
            return False

    async def is_writable(self) -> bool:
        """This replica's row in `replicas` rewritten in a transaction of its own: refused on a
        read-only database (a standby, `default_transaction_read_only`), a full disk or a lock held
        elsewhere, within `PROBE_SECONDS` in every case."""

        async def probe(db: asyncpg.Connection) -> None:
            await db.execute(PROBE, self.bus.replica)

        try:
            await asyncio.wait_for(self.engine.run(probe, lock_timeout=PROBE_SECONDS), PROBE_SECONDS)
        except (UpstreamUnavailable, TimeoutError):
            return False
        return True

    async def create_session(self, record: SessionRecord, *, max_open: int, max_per_owner: int) -> SessionAdmission:
        async def admit(db: asyncpg.Connection) -> SessionAdmission:
            # Under READ COMMITTED two replicas would both count below the cap: they take turns.
            await db.execute("SELECT pg_advisory_xact_lock($1)", ADMISSION_LOCK)
            if await db.fetchval("SELECT count(*) FROM sessions WHERE owner = $1", record.owner) >= max_per_owner:
                return "owner_full"
            if await db.fetchval("SELECT count(*) FROM sessions") >= max_open:
                return "table_full"
            await db.execute(
                "INSERT INTO sessions VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                record.id,
                record.owner,
                record.protocol_version,
                orjson.dumps(record.client_info),
                orjson.dumps(record.client_capabilities),
                record.log_level,
                record.created_at,
                record.last_seen,
            )
            return "created"

        return await self.engine.run(admit)

    async def get_session(self, session_id: str) -> SessionRecord | None:
        row = await self.engine.fetchrow("SELECT * FROM sessions WHERE id = $1", session_id)
        return None if row is None else _session_record(row)

    async def touch_session(self, session_id: str, now: float) -> None:
        await self.engine.execute(
            "UPDATE sessions SET last_seen = greatest(last_seen, $2) WHERE id = $1", session_id, now
        )

    async def set_log_level(self, session_id: str, level: str) -> None:
        await self.engine.execute("UPDATE sessions SET log_level = $2 WHERE id = $1", session_id, level)

    async def delete_session(self, session_id: str) -> bool:
        async def delete(db: asyncpg.Connection) -> bool:
            await _forget_streams(db, [session_id])
            return bool(await db.execute("DELETE FROM sessions WHERE id = $1", session_id) == "DELETE 1")

        return await self.engine.run(delete)

    async def expire_sessions(self, idle_before: float) -> list[str]:
        return [record.id for record in await self.expire_session_records(idle_before)]

    async def expire_session_records(self, idle_before: float) -> list[SessionRecord]:
        async def expire(db: asyncpg.Connection) -> list[SessionRecord]:
            # RETURNING names only the rows this transaction deleted: two replicas' sweeps never both get one.
            rows = await db.fetch("DELETE FROM sessions WHERE last_seen < $1 RETURNING *", idle_before)
            records = [_session_record(row) for row in rows]
            await _forget_streams(db, [record.id for record in records])
            return records

        return await self.engine.run(expire)

    async def count_sessions(self, owner: str | None = None) -> int:
        if owner is None:
            return int(await self.engine.fetchval("SELECT count(*) FROM sessions"))
        return int(await self.engine.fetchval("SELECT count(*) FROM sessions WHERE owner = $1", owner))

    async def append_event(
        self, session_id: str, stream_id: str, data: bytes, now: float, *, final: bool = False, request: str = ""
    ) -> int:
        async def append(db: asyncpg.Connection) -> int:
            # The counter row is locked until commit: appends to one stream from two replicas take turns.
            seq = await db.fetchval(
                "INSERT INTO streams VALUES ($1, $2, 1, $3) ON CONFLICT (session_id, stream_id) "
                "DO UPDATE SET last_seq = streams.last_seq + 1, ended = streams.ended OR excluded.ended "
                "RETURNING last_seq",
                session_id,
                stream_id,
                final,
            )
            if seq == 1 and request:
                # The first writer of a POST stream is the replica running its request.
                await db.execute(
                    "INSERT INTO stream_origins VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
                    session_id,
                    stream_id,
                    self.engine.replica,
                    request,
                )
            await db.execute("INSERT INTO events VALUES ($1, $2, $3, $4, $5)", session_id, stream_id, seq, data, now)
            return int(seq)

        return await self.engine.run(append)

    async def end_stream(self, session_id: str, stream_id: str) -> None:
        await self.engine.execute(
            "INSERT INTO streams VALUES ($1, $2, 0, TRUE) "
            "ON CONFLICT (session_id, stream_id) DO UPDATE SET ended = TRUE",
            session_id,
            stream_id,
        )

    async def stream_origin(self, session_id: str, stream_id: str) -> StreamOrigin | None:
        row = await self.engine.fetchrow(
            "SELECT o.origin, o.request FROM stream_origins o JOIN streams s USING (session_id, stream_id) "
            "WHERE o.session_id = $1 AND o.stream_id = $2 AND NOT s.ended",
            session_id,
            stream_id,
        )
        return StreamOrigin(row["origin"], row["request"]) if row else None

    async def stream_position(self, session_id: str, stream_id: str) -> tuple[int, bool]:
        row = await self.engine.fetchrow(
            "SELECT last_seq, ended FROM streams WHERE session_id = $1 AND stream_id = $2", session_id, stream_id
        )
        return (int(row["last_seq"]), bool(row["ended"])) if row else (0, False)

    async def events_after(self, session_id: str, stream_id: str, seq: int) -> list[StoredEvent]:
        rows = await self.engine.fetch(
            "SELECT seq, data FROM events WHERE session_id = $1 AND stream_id = $2 AND seq > $3 ORDER BY seq",
            session_id,
            stream_id,
            seq,
        )
        return [StoredEvent(seq=int(row["seq"]), data=bytes(row["data"])) for row in rows]

    async def purge_events(self, before: float) -> int:
        status = await self.engine.execute("DELETE FROM events WHERE created_at < $1", before)
        return int(status.rsplit(" ", 1)[-1])

    async def subscribe(self, session_id: str, uri: str) -> None:
        await self.engine.execute("INSERT INTO subscriptions VALUES ($1, $2) ON CONFLICT DO NOTHING", uri, session_id)

    async def unsubscribe(self, session_id: str, uri: str) -> None:
        await self.engine.execute("DELETE FROM subscriptions WHERE uri = $1 AND session_id = $2", uri, session_id)

    async def subscribers(self, uri: str) -> list[str]:
        rows = await self.engine.fetch("SELECT session_id FROM subscriptions WHERE uri = $1", uri)
        return [row["session_id"] for row in rows]


async def _forget_streams(db: asyncpg.Connection, session_ids: list[str]) -> None:
    await db.execute("DELETE FROM events WHERE session_id = ANY($1::text[])", session_ids)
    await db.execute("DELETE FROM streams WHERE session_id = ANY($1::text[])", session_ids)
    await db.execute("DELETE FROM subscriptions WHERE session_id = ANY($1::text[])", session_ids)


def _session_record(row: asyncpg.Record) -> SessionRecord:
    return SessionRecord(
        id=row["id"],
        owner=row["owner"],
        protocol_version=row["protocol_version"],
        client_info=orjson.loads(row["client_info"]),
        client_capabilities=orjson.loads(row["client_capabilities"]),
        log_level=row["log_level"],
        created_at=row["created_at"],
        last_seen=row["last_seen"],
    )
