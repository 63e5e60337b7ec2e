"""One MCP session's live state in this process: its streams, the requests it runs, the requests
the server waits on; what must outlive the process goes to the store (endpoint/legacy/sessions.py
says which, and `SessionManager` creates, finds and ends sessions).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any, Protocol

import anyio
import orjson
import structlog

from aql_mcp.endpoint.legacy.events import STANDALONE, EventStream
from aql_mcp.exceptions import ShuttingDown
from aql_mcp.jsonrpc.messages import RequestId, encode_notification
from aql_mcp.store.base import SessionRecord, Signal, Store

log = structlog.get_logger("aql_mcp.sessions")


class SessionHost(Protocol):
    """What a session needs of the manager that holds it (`SessionManager`), named here so the
    two modules do not import each other."""

    @property
    def store(self) -> Store: ...

    @property
    def stopping(self) -> ShuttingDown | None: ...


class Cancellable(Protocol):
    """What an in-flight request offers to `notifications/cancelled`."""

    def cancel(self) -> None: ...


class PendingRequest:
    """A request the server sent to the client, waiting for its response."""

    __slots__ = ("done", "error", "result", "stopped")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.result: dict[str, Any] | None = None
        self.error: dict[str, Any] | None = None
        self.stopped: ShuttingDown | None = None

    def interrupt(self, reason: ShuttingDown) -> None:
        """Stop waiting: no answer will come; the waiting call raises `reason`."""
        self.stopped = reason
        self.done.set()


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
        "streams",
        "touched_at",
    )

    def __init__(self, record: SessionRecord, manager: SessionHost) -> None:
        self.record = record
        self.last_seen = record.last_seen
        self.last_persisted = record.last_seen
        self.touched_at = record.last_seen  # the last attempt to write last_seen, taken or not
        self.streams: dict[str, EventStream] = {}
        self.in_flight: dict[RequestId, Cancellable] = {}
        self.pending: dict[RequestId, PendingRequest] = {}
        self._ids = itertools.count(1)
        self._manager = manager

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

    async def subscribe(self, uri: str) -> None:
        await self._manager.store.subscribe(self.id, uri)

    async def unsubscribe(self, uri: str) -> None:
        await self._manager.store.unsubscribe(self.id, uri)

    @property
    def stopping(self) -> ShuttingDown | None:
        """Set once the replica shuts down: a request to the client could no longer be answered here."""
        return self._manager.stopping

    def next_request_id(self) -> str:
        return f"srv-{next(self._ids)}"

    def open_stream(self, stream_id: str, *, follows: bool = False, request: RequestId | None = None) -> EventStream:
        answers = orjson.dumps(request).decode() if request is not None else ""
        store = self._manager.store
        stream = EventStream(session_id=self.id, stream_id=stream_id, store=store, follows=follows, request=answers)
        self.streams[stream_id] = stream
        return stream

    def standalone(self) -> EventStream:
        stream = self.streams.get(STANDALONE)
        return stream if stream is not None else self.open_stream(STANDALONE)

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        """A server-initiated notification: on the GET stream only, never broadcast (§ Multiple Connections)."""
        await self.standalone().emit(encode_notification(method, params))

    def resolve(self, message_id: RequestId, result: dict[str, Any] | None, error: dict[str, Any] | None) -> bool:
        """Hand the client's answer to the request waiting for it here; False if none waits here."""
        waiter = self.pending.pop(message_id, None)
        if waiter is None:
            return False
        waiter.result, waiter.error = result, error
        waiter.done.set()
        return True

    async def answer(self, message_id: RequestId, result: dict[str, Any] | None, error: dict[str, Any] | None) -> None:
        """The client's answer to a server request, whichever replica sent that request."""
        if not self.resolve(message_id, result, error):
            body = orjson.dumps({"result": result, "error": error})
            await self._manager.store.bus.publish(Signal("response", self.id, _target(message_id), body))

    async def cancel(self, request_id: RequestId, reason: str) -> None:
        """`notifications/cancelled`: stop the request here, or tell the replica that runs it."""
        running = self.in_flight.get(request_id)
        if running is None:
            await self._manager.store.bus.publish(Signal("cancel", self.id, _target(request_id)))
            return
        log.info("request_cancelled", session_id=self.id[:8], reason=reason[:100])
        running.cancel()

    def is_busy(self) -> bool:
        """A connection is open or a request runs here: this process must keep its copy."""
        return bool(self.in_flight) or any(stream.sink is not None for stream in self.streams.values())

    async def close(self) -> None:
        for scope in self.in_flight.values():
            scope.cancel()
        for stream in list(self.streams.values()):
            await stream.close()
        self.streams.clear()


def _target(request_id: RequestId) -> str:
    """A JSON-RPC id as a signal's target: its JSON, so 1 and "1" stay apart."""
    return orjson.dumps(request_id).decode()
