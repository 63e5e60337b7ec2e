"""MCP sessions: created by `initialize`, owned by one subject, kept in the store.

The store holds what must survive a restart and what every replica must see (who owns the
session, the negotiated version, the client's capabilities, its log level, its resource
subscriptions, its streams' events). Live state (open connections, requests in flight, requests
the server is waiting on) stays in the process that holds it; when a message for it lands on
another replica (a cancellation, the client's answer), that replica signals it over the store's
bus (docs/store.md, "Any replica serves any request"). Reads are served from memory; `last_seen`
is written to the store at most once per `touch_interval`, not on every request, and that write is
best-effort: a store that cannot write (a lock held elsewhere, a full disk) fails the calls that
must write, never a `ping` or a read that only happened to be due for a touch. The sweep writes a
last use held back this way later. One session's live state is a `Session` (endpoint/legacy/session.py).
"""

from __future__ import annotations

import contextlib
import secrets
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any

import orjson
import structlog

from aql_mcp.endpoint.legacy.events import STANDALONE, EventStream
from aql_mcp.endpoint.legacy.session import Session
from aql_mcp.exceptions import RateLimited, SessionLimitReached, SessionNotFound, ShuttingDown, StoreError
from aql_mcp.jsonrpc.messages import encode_notification
from aql_mcp.store.base import SessionRecord, Signal, Store

log = structlog.get_logger("aql_mcp.sessions")


# Told the ids of sessions that ended and when (`SessionEndPlugin.on_session_end`).
SessionsEnded = Callable[[Sequence[str], float], Awaitable[None]]


async def _nothing_ended(session_ids: Sequence[str], now: float) -> None:
    return


class SessionManager:
    """Creates, finds, expires and deletes sessions; the store is the source of truth."""

    def __init__(
        self,
        store: Store,
        *,
        idle_seconds: int,
        max_open: int,
        retry_after: int,
        max_per_owner: int = 100,
        on_limit: Callable[[str], None] | None = None,
        on_end: SessionsEnded | None = None,
        on_duration: Callable[[SessionRecord, float], None] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        # Told each session this replica ends with its record and age (`mcp.server.session.duration`).
        self._on_duration = on_duration or (lambda record, seconds: None)
        # The plugins' hook (plugin_host/hooks.py): what they keep per session ends with it.
        self._on_end = on_end or _nothing_ended
        self._idle = idle_seconds
        self._max_open = max_open
        self._max_per_owner = max_per_owner
        self._on_limit = on_limit or (lambda kind: None)
        self._retry_after = retry_after
        self._clock = clock
        self._touch_interval = min(60.0, idle_seconds / 4)
        self._live: dict[str, Session] = {}
        self.stopping: ShuttingDown | None = None

    def live_count(self) -> int:
        return len(self._live)

    def __iter__(self) -> Iterator[Session]:
        return iter(list(self._live.values()))

    async def create(
        self,
        *,
        owner: str,
        protocol_version: str,
        client_info: dict[str, Any],
        capabilities: dict[str, Any],
        log_level: str,
    ) -> Session:
        now = self._clock()
        record = SessionRecord(
            # 256 bits from the OS CSPRNG, URL-safe base64: visible ASCII only (2025-11-25 transports).
            id=secrets.token_urlsafe(32),
            owner=owner,
            protocol_version=protocol_version,
            client_info=client_info,
            client_capabilities=capabilities,
            log_level=log_level,
            created_at=now,
            last_seen=now,
        )
        admission = await self.store.create_session(record, max_open=self._max_open, max_per_owner=self._max_per_owner)
        if admission == "owner_full":
            # One caller may not take the whole table (corporate §14): 429, not the table-full 503.
            self._on_limit("sessions")
            raise RateLimited("Rate limited: too many open sessions for this caller", retry_after=self._retry_after)
        if admission == "table_full":
            self._on_limit("session_table")
            raise SessionLimitReached(retry_after=self._retry_after)
        session = Session(record, self)
        self._live[record.id] = session
        return session

    async def get(self, session_id: str, *, owner: str) -> Session:
        """The session, loaded from the store when this process has not seen it lately (a restart,
        another replica serving it meanwhile); SessionNotFound when it is unknown, idle or not `owner`'s."""
        now = self._clock()
        session = self._live.get(session_id)
        if session is None or now - session.last_seen > self._idle:
            session = await self._load(session_id, now)
        if session.record.owner != owner:
            # Another subject's session is answered exactly as a missing one: no oracle.
            raise SessionNotFound()
        session.last_seen = now
        if now - session.touched_at > self._touch_interval:
            await self._touch(session, now)
        return session

    async def _touch(self, session: Session, now: float) -> None:
        # A touch the store refused is tried again by the sweep, and by a request one interval later.
        session.touched_at = now
        try:
            await self.store.touch_session(session.id, now)
        except StoreError:
            log.warning("session_touch_failed", session_id=session.id[:8])
            return
        session.last_persisted = max(session.last_persisted, now)

    async def _load(self, session_id: str, now: float) -> Session:
        record = await self.store.get_session(session_id)
        live = self._live.get(session_id)
        if record is None:
            await self._forget(session_id)
            raise SessionNotFound()
        if now - record.last_seen > self._idle:
            # Idle by every replica's account: the store's last use is the latest any of them wrote.
            # Gone for the caller whether or not the store takes the delete now (the sweep retries).
            with contextlib.suppress(StoreError):
                await self.delete(live or Session(record, self))
            raise SessionNotFound()
        if live is None:
            return self._live.setdefault(session_id, Session(record, self))
        live.last_seen = live.last_persisted = live.touched_at = record.last_seen
        return live

    async def delete(self, session: Session) -> None:
        self._live.pop(session.id, None)
        await session.close()
        await self.store.delete_session(session.id)
        now = self._clock()
        self._on_duration(session.record, now - session.record.created_at)
        await self._on_end([session.id], now)
        await self.store.bus.publish(Signal("session_ended", session.id))

    async def sweep(self) -> int:
        """Expire sessions idle by the store's account; forget the ones idle here but busy elsewhere."""
        now = self._clock()
        for session in list(self._live.values()):
            if session.last_seen > session.last_persisted:
                await self._touch(session, session.last_seen)
            if now - session.last_seen > self._idle and not session.is_busy():
                # Only this process's copy: another replica may be serving the session.
                self._live.pop(session.id, None)
        expired = await self.store.expire_session_records(now - self._idle)
        for record in expired:
            session_id = record.id
            # Measured by the replica whose sweep deleted it, holding a copy or not.
            self._on_duration(record, now - record.created_at)
            await self._forget(session_id)
            await self._on_end([session_id], now)
            await self.store.bus.publish(Signal("session_ended", session_id))
        return len(expired)

    async def _forget(self, session_id: str) -> None:
        live = self._live.pop(session_id, None)
        if live is not None:
            await live.close()

    async def on_signal(self, signal: Signal) -> None:
        """What another replica says about a session this process may hold (store/base.py `Signal`)."""
        if signal.kind == "resync":
            await self._resync()
            return
        session = self._live.get(signal.session_id)
        if session is None:
            return
        if signal.kind == "events":
            stream = session.streams.get(signal.target)
            if stream is not None:
                await stream.catch_up()
        elif signal.kind == "cancel":
            running = session.in_flight.get(orjson.loads(signal.target))
            if running is not None:
                log.info("request_cancelled", session_id=session.id[:8], reason="from another replica")
                running.cancel()
        elif signal.kind == "response":
            answer = orjson.loads(signal.payload)
            session.resolve(orjson.loads(signal.target), answer.get("result"), answer.get("error"))
        elif signal.kind == "session_ended":
            await self._forget(session.id)

    async def _resync(self) -> None:
        """Wake-ups may have been lost: drop sessions that ended meanwhile, catch up every open stream."""
        for session in list(self._live.values()):
            if await self.store.get_session(session.id) is None:
                await self._forget(session.id)
                continue
            for stream in list(session.streams.values()):
                await stream.catch_up()

    def interrupt_waits(self, *, retry_ms: int) -> int:
        """Shutting down, the drain window over: this replica stops accepting connections, so a
        client's answer to a server request (elicitation, sampling) can no longer reach it. Every
        call waiting for one ends now with `ShuttingDown`, and so does any later request to a client."""
        self.stopping = ShuttingDown(retry_ms=retry_ms)
        waiting = [waiter for session in self._live.values() for waiter in session.pending.values()]
        for waiter in waiting:
            waiter.interrupt(self.stopping)
        return len(waiting)

    async def close_all(self) -> None:
        """On shutdown: persist the last use held back by touch coalescing, then close."""
        for session in list(self._live.values()):
            if session.last_seen > session.last_persisted:
                await self.store.touch_session(session.id, session.last_seen)
            await session.close()
        self._live.clear()

    async def resource_updated(self, uri: str) -> None:
        """Notify every subscribed session, on its GET stream wherever that is held."""
        message = encode_notification("notifications/resources/updated", {"uri": uri})
        for session_id in await self.store.subscribers(uri):
            live = self._live.get(session_id)
            stream = live.standalone() if live else self._detached(session_id)
            try:
                await stream.emit(message)
            except StoreError:
                log.warning("resource_update_not_delivered", session_id=session_id[:8])

    def _detached(self, session_id: str) -> EventStream:
        """The GET stream of a session this process does not hold: appended to, delivered elsewhere."""
        return EventStream(session_id=session_id, stream_id=STANDALONE, store=self.store)

    async def broadcast(self, method: str) -> None:
        """A list-changed notification to every session whose GET stream is open on this replica:
        every replica is told of every change (endpoint/notifier.py) and a GET stream is open on
        one of them, so each session hears a change once, whichever replicas know it."""
        for session in list(self._live.values()):
            stream = session.streams.get(STANDALONE)
            if stream is None or stream.sink is None:
                continue
            try:
                await stream.emit(encode_notification(method, {}))
            except StoreError:
                log.warning("list_change_not_delivered", session_id=session.id[:8])
