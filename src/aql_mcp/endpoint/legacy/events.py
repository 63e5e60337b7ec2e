"""SSE streams of a session, their event log, and resumption (MCP 2025-11-25 transports).

A stream outlives the HTTP connection that carries it: every event is numbered within its
stream, written to the store's event log and then to whichever connection is attached now. A
client that lost the connection sends GET with `Last-Event-ID` and gets exactly that stream's
later events replayed, then the live rest. Event ids are `<stream>-<seq>`, so the id names its
stream ("Resumability and Redelivery": ids encode the originating stream). The store numbers the
events, so any replica can append to a stream and any replica can resume it (docs/store.md).
"""

from __future__ import annotations

import asyncio
import secrets
import time
from typing import Protocol

import structlog

from aql_mcp.endpoint.flag import Flag
from aql_mcp.endpoint.sse import format_event, format_retry
from aql_mcp.exceptions import StoreError
from aql_mcp.store.base import Signal, Store

log = structlog.get_logger("aql_mcp.events")
STANDALONE = "g"  # the id of a session's GET stream (server-initiated messages), the same on every replica


class Sink(Protocol):
    """An open SSE connection an event can be written to."""

    async def write(self, chunk: bytes) -> None: ...
    async def end(self) -> None: ...


def parse_event_id(value: str) -> tuple[str, int] | None:
    """`<stream>-<seq>`, or None. ASCII digits only (`str.isdigit` takes `²`, which `int` refuses)
    and a sequence that fits the store's 64-bit column: any other header is malformed, never a 500."""
    stream_id, sep, seq = value.rpartition("-")
    if not sep or not stream_id or not (seq.isascii() and seq.isdigit()) or len(value) > 128:
        return None
    number = int(seq)
    return (stream_id, number) if number < 2**63 else None


def new_stream_id() -> str:
    return secrets.token_hex(8)


class EventStream:
    """One stream: numbered and logged in the store, delivered to the connection attached here.

    Any replica may append to a stream (a notification for a session whose GET stream another
    replica holds); the connection is fed in number order from `delivered` on, straight from an
    append made here when it is the next number, otherwise from the store (`catch_up`, which the
    bus triggers when another replica appended). So every event reaches the connection once, in
    order, whoever wrote it.
    """

    __slots__ = (
        "_bus",
        "_lock",
        "_store",
        "delivered",
        "done",
        "follows",
        "id",
        "request",
        "seq",
        "session_id",
        "sink",
    )

    def __init__(
        self, *, session_id: str, stream_id: str, store: Store, follows: bool = False, request: str = ""
    ) -> None:
        self.session_id = session_id
        self.id = stream_id
        # The JSON id of the request a POST stream answers, recorded with its first event, so a
        # replica following the stream can answer it if this one dies (store/base.py `stream_origin`).
        self.request = request
        self.seq = 0  # the newest number this process knows of
        self.delivered = 0  # the newest number written to `sink`
        self.sink: Sink | None = None
        self.done = Flag()
        # A stream answered by another replica, followed here after the client resumed on this one:
        # it ends with the response, whoever writes it.
        self.follows = follows
        self._store = store
        self._bus = store.bus
        # asyncio's lock makes its waiter queue on first contention; anyio's makes one per stream.
        self._lock = asyncio.Lock()

    async def emit(self, data: bytes, *, final: bool = False, retry_ms: int | None = None) -> None:
        """Log and deliver one JSON-RPC message; `final` ends the stream after it (the response);
        `retry_ms` sets the client's reconnection time in the same event."""
        async with self._lock:
            seq = await self._store.append_event(
                self.session_id, self.id, data, time.time(), final=final, request=self.request
            )
            self.seq = max(self.seq, seq)
            # Always, not only without a sink here: the client may have dropped this connection
            # unnoticed and resumed on another replica, which follows the stream from these wake-ups.
            await self._bus.publish(Signal("events", self.session_id, self.id))
            if self.sink is not None and seq == self.delivered + 1:
                await self._write(seq, data, retry_ms)
            elif self.sink is not None:
                await self._catch_up()
            if final:
                self.done.set()
                await self._detach()

    async def catch_up(self) -> None:
        """Deliver what the store holds beyond `delivered` (another replica appended)."""
        async with self._lock:
            if self.sink is not None:
                await self._catch_up()

    async def attach(self, sink: Sink, *, after: int | None, retry_ms: int | None) -> None:
        """Make `sink` the live connection, after replaying what came after event `after`."""
        async with self._lock:
            await self._detach()
            if after is None:
                self.seq = max(self.seq, (await self._store.stream_position(self.session_id, self.id))[0])
            if retry_ms is not None and after is None:
                # Priming event: an id and empty data, so the client can resume from here (§ Sending Messages 6).
                await sink.write(format_event(f"{self.id}-{self.seq}", b"", retry_ms))
            elif retry_ms is not None:
                # Resuming: the retry hint alone; an id here would repeat one already delivered.
                await sink.write(format_retry(retry_ms))
            self.sink = sink
            self.delivered = self.seq if after is None else after
            await self._catch_up()
            if self.done.is_set():
                await self._detach()

    async def detach(self, sink: Sink | None = None, *, retry_ms: int | None = None) -> None:
        """Close the connection but keep the stream; a `retry` hint tells the client when to resume."""
        async with self._lock:
            if self.sink is None or (sink is not None and self.sink is not sink):
                return
            if retry_ms is not None:
                await self.sink.write(format_retry(retry_ms))
            await self._detach()

    async def abandon(self) -> None:
        """The request was cancelled: no response will come. Recorded in the store, so resuming the
        stream answers 410 on every replica, and a replica following it ends too."""
        async with self._lock:
            self.done.set()
            try:
                await self._store.end_stream(self.session_id, self.id)
                await self._bus.publish(Signal("events", self.session_id, self.id))
            except StoreError:
                # The connection still ends here; a resume elsewhere then follows until its deadline.
                log.warning("stream_end_not_recorded", session_id=self.session_id[:8])
            await self._detach()

    async def close(self) -> None:
        """End the stream here for good (session deleted or closed)."""
        async with self._lock:
            self.done.set()
            await self._detach()

    async def _catch_up(self) -> None:
        for event in await self._store.events_after(self.session_id, self.id, self.delivered):
            await self._write(event.seq, event.data)
        if self.follows and (await self._store.stream_position(self.session_id, self.id))[1]:
            # Ended with its response, or cancelled, on the replica that ran the request.
            self.done.set()
            await self._detach()

    async def _write(self, seq: int, data: bytes, retry_ms: int | None = None) -> None:
        assert self.sink is not None
        await self.sink.write(format_event(f"{self.id}-{seq}", data, retry_ms))
        self.delivered = seq
        self.seq = max(self.seq, seq)

    async def _detach(self) -> None:
        sink, self.sink = self.sink, None
        if sink is not None:
            await sink.end()
