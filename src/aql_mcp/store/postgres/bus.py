"""Signals between replicas over PostgreSQL: the tables are the truth, LISTEN/NOTIFY only a wake-up.

- `events` wake-ups carry a session and stream id and nothing else; the replica holding that stream
  reads the events table from the last event it delivered.
- Every other signal (a cancellation, a client's answer, a session's end) is written to `signals`
  first; its wake-up carries nothing, and each replica reads the signals after the last it saw.
- Notifications go out after the write committed, on a pooled connection outside any transaction,
  batched: one NOTIFY per event-loop turn for everything published during it.
- The listener holds a connection of its own (LISTEN does not pass PgBouncer in transaction mode;
  `store.listen_url` may point past it), pings it, reconnects with backoff, and after every
  (re)connect hands `Signal.RESYNC` to the service and reads the signals it may have missed.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import asyncpg
import structlog

from aql_mcp.exceptions import StoreError
from aql_mcp.store.base import Signal, SignalHandler
from aql_mcp.store.postgres.engine import FAILURES, PostgresEngine

CHANNEL = "aql_mcp"
# NOTIFY payloads are capped at 8000 bytes; a batch is split below that.
PAYLOAD_BYTES = 7000
PING_SECONDS = 5.0
BACKOFF_SECONDS = (0.2, 0.5, 1.0, 2.0, 5.0)
# A replica not heard from for this long no longer counts (three missed heartbeats).
LIVE_SECONDS = 15.0
# Signals are only needed until every replica has read them; each replica rereads the recent ones
# (database clock) on every wake-up and after every reconnect.
SIGNAL_RETENTION_SECONDS = 300.0
RECENT_SECONDS = 60.0
# How long close() lets the loops finish what they are doing before it cancels them.
STOP_SECONDS = 5.0
STOP = "stop"
# Liveness is judged with the database's clock only (docs/executions.md, "Where the work runs").
DB_NOW = "extract(epoch FROM clock_timestamp())"
BEAT = f"INSERT INTO replicas VALUES ($1, {DB_NOW}) ON CONFLICT (id) DO UPDATE SET seen_at = excluded.seen_at"  # noqa: S608 - constants
RECENT_SIGNALS = (
    "SELECT {columns} FROM signals "  # noqa: S608 - the columns are constants of this module
    f"WHERE created_at > extract(epoch FROM clock_timestamp()) - {RECENT_SECONDS} ORDER BY id"
)

log = structlog.get_logger("aql_mcp.bus")


class PostgresBus:
    """`Bus` of a replica sharing a PostgreSQL store with others."""

    def __init__(self, engine: PostgresEngine) -> None:
        self._engine = engine
        self.replica = engine.replica
        self._handler: SignalHandler | None = None
        self._pending: set[str] = set()
        self._flushing = False
        self._seen: dict[int, float] = {}
        self._inbox: asyncio.Queue[str] = asyncio.Queue()
        self._tasks: list[asyncio.Task[None]] = []
        self.connected = asyncio.Event()
        self._stopping = asyncio.Event()
        self._lost = asyncio.Event()

    def listen(self, handler: SignalHandler) -> None:
        self._handler = handler

    async def open(self) -> None:
        # Signals from before this replica started are not for it.
        for row in await self._engine.fetch(RECENT_SIGNALS.format(columns="id, created_at")):
            self._seen[int(row["id"])] = float(row["created_at"])
        self._tasks = [asyncio.create_task(self._listen()), asyncio.create_task(self._deliver())]

    async def close(self) -> None:
        """Stop each loop at its next wait rather than cancelling it: asyncpg answers a query
        cancelled mid-flight by opening another connection to cancel it on the server, and when that
        one fails its error escapes from a task nobody awaits (MagicStack/asyncpg#1310). What is
        still running after `STOP_SECONDS` (a connect to a database that went away) is cancelled."""
        self._stopping.set()
        self._lost.set()
        self._inbox.put_nowait(STOP)
        while self._tasks:
            running, self._tasks = self._tasks, []
            _, late = await asyncio.wait(running, timeout=STOP_SECONDS)
            for task in late:
                task.cancel()
            await asyncio.gather(*late, return_exceptions=True)
        with contextlib.suppress(StoreError):
            await self._engine.execute("DELETE FROM replicas WHERE id = $1", self.replica)

    async def publish(self, signal: Signal) -> None:
        if signal.kind == "events":
            self._wake(f"e {self.replica} {signal.session_id} {signal.target}")
            return
        await self._engine.execute(
            "INSERT INTO signals (origin, kind, session_id, target, payload, created_at) "
            "VALUES ($1, $2, $3, $4, $5, extract(epoch FROM clock_timestamp()))",
            self.replica,
            signal.kind,
            signal.session_id,
            signal.target,
            signal.payload,
        )
        self._wake("s")

    async def gone(self, replica: str) -> bool:
        """No heartbeat from `replica` for `LIVE_SECONDS` by the database's clock (one clock for
        every judge, whatever the replicas' own say), or no row at all (it stopped and removed it)."""
        seen = await self._engine.fetchval(
            "SELECT seen_at >= extract(epoch FROM clock_timestamp()) - $2 FROM replicas WHERE id = $1",
            replica,
            LIVE_SECONDS,
        )
        return seen is not True

    async def heartbeat(self, now: float) -> int:
        """`now` is not used: the row is written and judged with the database's clock, so a replica
        whose own clock is off is neither counted gone nor counts others gone."""

        async def beat(db: asyncpg.Connection) -> int:
            await db.execute(BEAT, self.replica)
            await db.execute(f"DELETE FROM replicas WHERE seen_at < {DB_NOW} - $1", 4 * LIVE_SECONDS)  # noqa: S608
            await db.execute(f"DELETE FROM signals WHERE created_at < {DB_NOW} - $1", SIGNAL_RETENTION_SECONDS)  # noqa: S608
            return int(await db.fetchval(f"SELECT count(*) FROM replicas WHERE seen_at >= {DB_NOW} - $1", LIVE_SECONDS))  # noqa: S608

        return max(1, await self._engine.run(beat))

    # Sending ------------------------------------------------------------------------------

    def _wake(self, line: str) -> None:
        self._pending.add(line)
        if not self._flushing and not self._stopping.is_set():
            # The task first runs on the next turn of the loop: what is published until then goes in one batch.
            self._flushing = True
            self._tasks.append(asyncio.create_task(self._flush()))

    async def _flush(self) -> None:
        lines, self._pending, self._flushing = sorted(self._pending), set(), False
        try:
            async with self._engine.connection() as connection:
                for payload in _batches(lines):
                    await connection.execute("SELECT pg_notify($1, $2)", CHANNEL, payload)
        except Exception:
            # Nothing is lost: the rows are written; listeners catch up when they reconnect.
            log.warning("bus_notify_failed")
        finally:
            self._tasks = [task for task in self._tasks if not task.done()]

    # Receiving ----------------------------------------------------------------------------

    async def _listen(self) -> None:
        attempt = 0
        while not self._stopping.is_set():
            connection: asyncpg.Connection | None = None
            try:
                connection = await self._engine.connect(self._engine.options.listen_url or None)
                attempt = 0
                await self._hold(connection)
            except FAILURES as exc:
                self.connected.clear()
                delay = BACKOFF_SECONDS[min(attempt, len(BACKOFF_SECONDS) - 1)]
                attempt += 1
                log.warning("bus_listener_lost", error=type(exc).__name__, retry_in=delay)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), delay)
            finally:
                if connection is not None:
                    with contextlib.suppress(Exception):
                        await asyncio.wait_for(connection.close(), timeout=1.0)

    async def _hold(self, connection: asyncpg.Connection) -> None:
        """Listen on `connection` until it is lost; the first thing is a resync."""
        lost = self._lost = asyncio.Event()
        connection.add_termination_listener(lambda _connection: lost.set())
        await connection.add_listener(CHANNEL, self._on_notify)
        self.connected.set()
        self._inbox.put_nowait("r")
        while not self._stopping.is_set():
            # The server closing the connection, or close(), ends the wait at once; the ping finds a
            # connection that died silently (a network partition).
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(lost.wait(), PING_SECONDS)
            if self._stopping.is_set():
                return
            if lost.is_set():
                raise ConnectionResetError("the listener's connection was closed")
            await connection.fetchval("SELECT 1", timeout=PING_SECONDS)

    def _on_notify(self, connection: Any, pid: int, channel: str, payload: str) -> None:
        for line in payload.split("\n"):
            self._inbox.put_nowait(line)

    async def _deliver(self) -> None:
        """One consumer, so signals reach the service in the order they arrived."""
        while True:
            line = await self._inbox.get()
            if line == STOP:
                return
            try:
                await self._handle(line)
            except Exception:
                log.exception("bus_signal_failed")

    async def _handle(self, line: str) -> None:
        if self._handler is None:
            return
        if line == "r":
            await self._handler(Signal.RESYNC)
            await self._read_signals()
        elif line == "s":
            await self._read_signals()
        elif line.startswith("e "):
            _, origin, session_id, stream_id = line.split(" ", 3)
            if origin != self.replica:
                await self._handler(Signal("events", session_id, stream_id))

    async def _read_signals(self) -> None:
        """The recent signals this replica has not handled yet. Not `id > last seen`: a sequence
        number is taken before its transaction commits, so a lower id can become visible after a
        higher one; recent rows are read again and the ones seen are skipped."""
        assert self._handler is not None
        rows = await self._engine.fetch(
            RECENT_SIGNALS.format(columns="id, origin, kind, session_id, target, payload, created_at")
        )
        for row in rows:
            if int(row["id"]) in self._seen:
                continue
            self._seen[int(row["id"])] = float(row["created_at"])
            if row["origin"] != self.replica:
                await self._handler(Signal(row["kind"], row["session_id"], row["target"], bytes(row["payload"])))
        if rows:
            oldest = float(rows[0]["created_at"])
            self._seen = {key: at for key, at in self._seen.items() if at >= oldest}


def _batches(lines: list[str]) -> list[str]:
    batches: list[str] = []
    current: list[str] = []
    size = 0
    for line in lines:
        if current and size + len(line) + 1 > PAYLOAD_BYTES:
            batches.append("\n".join(current))
            current, size = [], 0
        current.append(line)
        size += len(line) + 1
    if current:
        batches.append("\n".join(current))
    return batches
