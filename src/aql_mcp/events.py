"""SSE streams of a session, their event log, and resumption (MCP 2025-11-25 transports).

A stream outlives the HTTP connection that carries it: every event is numbered within its
stream, written to the store's event log and then to whichever connection is attached now. A
client that lost the connection sends GET with `Last-Event-ID` and gets exactly that stream's
later events replayed, then the live rest. Event ids are `<stream>-<seq>`, so the id names its
stream ("Resumability and Redelivery": ids encode the originating stream).
"""

from __future__ import annotations

import secrets
import time
from typing import Protocol

import anyio

from aql_mcp.store.base import Store

STANDALONE = "g"  # the id of a session's GET stream (server-initiated messages)


class Sink(Protocol):
    """An open SSE connection an event can be written to."""

    async def write(self, chunk: bytes) -> None: ...
    async def end(self) -> None: ...


def format_event(event_id: str | None, data: bytes, retry_ms: int | None = None) -> bytes:
    lines = []
    if event_id is not None:
        lines.append(b"id: " + event_id.encode("ascii"))
    if retry_ms is not None:
        lines.append(b"retry: " + str(retry_ms).encode("ascii"))
    lines.append(b"data: " + data)  # orjson never emits a raw newline, so one data line suffices
    return b"\n".join(lines) + b"\n\n"


def parse_event_id(value: str) -> tuple[str, int] | None:
    stream_id, sep, seq = value.rpartition("-")
    if not sep or not stream_id or not seq.isdigit() or len(value) > 128:
        return None
    return stream_id, int(seq)


def new_stream_id() -> str:
    return secrets.token_hex(8)


class EventStream:
    """One stream: numbered, logged, delivered to the connection attached at the time."""

    __slots__ = ("_lock", "_store", "done", "id", "seq", "session_id", "sink")

    def __init__(self, *, session_id: str, stream_id: str, store: Store) -> None:
        self.session_id = session_id
        self.id = stream_id
        self.seq = 0
        self.sink: Sink | None = None
        self.done = anyio.Event()
        self._store = store
        self._lock = anyio.Lock()

    async def emit(self, data: bytes, *, final: bool = False) -> None:
        """Log and deliver one JSON-RPC message; `final` ends the stream after it (the response)."""
        async with self._lock:
            self.seq += 1
            await self._store.append_event(self.session_id, self.id, self.seq, data, time.time())
            if self.sink is not None:
                await self.sink.write(format_event(f"{self.id}-{self.seq}", data))
            if final:
                self.done.set()
                await self._detach()

    async def attach(self, sink: Sink, *, after: int | None, retry_ms: int | None) -> None:
        """Make `sink` the live connection, after replaying what came after event `after`."""
        async with self._lock:
            await self._detach()
            if retry_ms is not None and after is None:
                # Priming event: an id and empty data, so the client can resume from here (§ Sending Messages 6).
                await sink.write(format_event(f"{self.id}-{self.seq}", b"", retry_ms))
            elif retry_ms is not None:
                # Resuming: the retry hint alone; an id here would repeat one already delivered.
                await sink.write(b"retry: " + str(retry_ms).encode("ascii") + b"\n\n")
            if after is not None:
                for event in await self._store.events_after(self.session_id, self.id, after):
                    await sink.write(format_event(f"{self.id}-{event.seq}", event.data))
            if self.done.is_set():
                await sink.end()
                return
            self.sink = sink

    async def detach(self, sink: Sink | None = None, *, retry_ms: int | None = None) -> None:
        """Close the connection but keep the stream; a `retry` hint tells the client when to resume."""
        async with self._lock:
            if self.sink is None or (sink is not None and self.sink is not sink):
                return
            if retry_ms is not None:
                await self.sink.write(b"retry: " + str(retry_ms).encode("ascii") + b"\n\n")
            await self._detach()

    async def close(self) -> None:
        """End the stream for good (session deleted, request cancelled)."""
        async with self._lock:
            self.done.set()
            await self._detach()

    async def _detach(self) -> None:
        sink, self.sink = self.sink, None
        if sink is not None:
            await sink.end()
