"""MCP sessions: created by `initialize`, owned by one subject, kept in the store.

The store holds what must survive a restart (who owns the session, the negotiated version, the
client's capabilities, its log level). Live state (open streams, requests in flight, requests
the server is waiting on) stays in this process. Reads are served from memory; `last_seen` is
written to the store at most once per `touch_interval`, not on every request.
"""

from __future__ import annotations

import itertools
import secrets
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol

import anyio
import structlog

from aql_mcp.events import STANDALONE, EventStream
from aql_mcp.exceptions import RateLimited, SessionLimitReached, SessionNotFound
from aql_mcp.jsonrpc.messages import RequestId, encode_notification
from aql_mcp.store.base import SessionRecord, Store

log = structlog.get_logger("aql_mcp.sessions")


class Cancellable(Protocol):
    """What an in-flight request offers to `notifications/cancelled`."""

    def cancel(self) -> None: ...


class PendingRequest:
    """A request the server sent to the client, waiting for its response."""

    __slots__ = ("done", "error", "result")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.result: dict[str, Any] | None = None
        self.error: dict[str, Any] | None = None


class Session:
    """One client session: the `Peer` handlers see, plus the live state of its streams."""

    __slots__ = (
        "_ids",
        "_manager",
        "in_flight",
        "last_persisted",
        "last_seen",
        "pending",
        "record",
        "standalone_id",
        "streams",
        "subscriptions",
    )

    def __init__(self, record: SessionRecord, manager: SessionManager) -> None:
        self.record = record
        self.last_seen = record.last_seen
        self.last_persisted = record.last_seen
        self.subscriptions: set[str] = set()
        self.streams: dict[str, EventStream] = {}
        self.in_flight: dict[RequestId, Cancellable] = {}
        self.pending: dict[RequestId, PendingRequest] = {}
        self._ids = itertools.count(1)
        self._manager = manager
        # New per process: a GET stream id from before a restart is replayed, then continued here.
        self.standalone_id = STANDALONE + secrets.token_hex(4)

    @property
    def id(self) -> str:
        return self.record.id

    @property
    def protocol_version(self) -> str:
        return self.record.protocol_version

    @property
    def client_capabilities(self) -> Mapping[str, Any]:
        return self.record.client_capabilities

    @property
    def log_level(self) -> str:
        return self.record.log_level

    async def set_log_level(self, level: str) -> None:
        self.record.log_level = level
        await self._manager.store.set_log_level(self.id, level)

    def subscribe(self, uri: str) -> None:
        self.subscriptions.add(uri)

    def unsubscribe(self, uri: str) -> None:
        self.subscriptions.discard(uri)

    def next_request_id(self) -> str:
        return f"srv-{next(self._ids)}"

    def open_stream(self, stream_id: str) -> EventStream:
        stream = EventStream(session_id=self.id, stream_id=stream_id, store=self._manager.store)
        self.streams[stream_id] = stream
        return stream

    def standalone(self) -> EventStream:
        stream = self.streams.get(self.standalone_id)
        return stream if stream is not None else self.open_stream(self.standalone_id)

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        """A server-initiated notification: on the GET stream only, never broadcast (§ Multiple Connections)."""
        await self.standalone().emit(encode_notification(method, params))

    def resolve(self, message_id: RequestId, result: dict[str, Any] | None, error: dict[str, Any] | None) -> bool:
        waiter = self.pending.pop(message_id, None)
        if waiter is None:
            return False
        waiter.result, waiter.error = result, error
        waiter.done.set()
        return True

    async def close(self) -> None:
        for scope in self.in_flight.values():
            scope.cancel()
        for stream in list(self.streams.values()):
            await stream.close()
        self.streams.clear()


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
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self._idle = idle_seconds
        self._max_open = max_open
        self._max_per_owner = max_per_owner
        self._on_limit = on_limit or (lambda kind: None)
        self._retry_after = retry_after
        self._clock = clock
        self._touch_interval = min(60.0, idle_seconds / 4)
        self._live: dict[str, Session] = {}

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
        if await self.store.count_sessions(owner=owner) >= self._max_per_owner:
            # One caller may not take the whole table (corporate §14): 429, not the table-full 503.
            self._on_limit("sessions")
            raise RateLimited("Rate limited: too many open sessions for this caller", retry_after=self._retry_after)
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
        if not await self.store.create_session(record, max_open=self._max_open):
            self._on_limit("session_table")
            error = SessionLimitReached(data={"retryAfter": self._retry_after})
            error.headers["retry-after"] = str(self._retry_after)
            raise error
        session = Session(record, self)
        self._live[record.id] = session
        return session

    async def get(self, session_id: str, *, owner: str) -> Session:
        """The live session, loaded from the store after a restart; SessionNotFound otherwise."""
        now = self._clock()
        session = self._live.get(session_id)
        if session is None:
            record = await self.store.get_session(session_id)
            if record is None:
                raise SessionNotFound()
            session = self._live.setdefault(session_id, Session(record, self))
        if session.record.owner != owner:
            # Another subject's session is answered exactly as a missing one: no oracle.
            raise SessionNotFound()
        if now - session.last_seen > self._idle:
            await self.delete(session)
            raise SessionNotFound()
        session.last_seen = now
        if now - session.last_persisted > self._touch_interval:
            session.last_persisted = now
            await self.store.touch_session(session_id, now)
        return session

    async def delete(self, session: Session) -> None:
        self._live.pop(session.id, None)
        await session.close()
        await self.store.delete_session(session.id)

    async def sweep(self) -> int:
        """Expire idle sessions, here and in the store; return how many ended."""
        now = self._clock()
        ended = 0
        for session in list(self._live.values()):
            if now - session.last_seen > self._idle:
                await self.delete(session)
                ended += 1
            elif session.last_seen > session.last_persisted:
                session.last_persisted = session.last_seen
                await self.store.touch_session(session.id, session.last_seen)
        expired = await self.store.expire_sessions(now - self._idle)
        for session_id in expired:
            live = self._live.pop(session_id, None)
            if live is not None:
                await live.close()
        return ended + len(expired)

    async def close_all(self) -> None:
        """On shutdown: persist the last use held back by touch coalescing, then close."""
        for session in list(self._live.values()):
            if session.last_seen > session.last_persisted:
                await self.store.touch_session(session.id, session.last_seen)
            await session.close()
        self._live.clear()

    async def resource_updated(self, uri: str) -> None:
        for session in list(self._live.values()):
            if uri in session.subscriptions:
                await session.notify("notifications/resources/updated", {"uri": uri})

    async def broadcast(self, method: str) -> None:
        """A list-changed notification to every live session, each on its own GET stream."""
        for session in list(self._live.values()):
            await session.notify(method, {})
