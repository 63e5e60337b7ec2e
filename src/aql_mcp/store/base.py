"""The store interface: everything that must outlive a request goes through it.

Engines implement `Store`; callers never learn which engine is underneath. Methods are async so
an engine over the network (PostgreSQL) fits the same shape; the embedded SQLite engine answers
them synchronously because its calls take microseconds (a thread hop would cost more).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from aql_mcp.store.confirmations import ConfirmationStore
from aql_mcp.store.records import RecordStore


@dataclass(slots=True)
class SessionRecord:
    """A session as stored: what survives a restart."""

    id: str
    owner: str
    protocol_version: str
    client_info: dict[str, Any] = field(default_factory=dict)
    client_capabilities: dict[str, Any] = field(default_factory=dict)
    log_level: str = "info"
    created_at: float = 0.0
    last_seen: float = 0.0


@dataclass(frozen=True, slots=True)
class StoredEvent:
    seq: int
    data: bytes


class Store(Protocol):
    """Sessions and the SSE event log, and the facets the built-in operations use (records,
    confirmation tokens). Every write is atomic; a failed write changes nothing."""

    @property
    def records(self) -> RecordStore: ...
    @property
    def confirmations(self) -> ConfirmationStore: ...

    async def open(self) -> None: ...
    async def close(self) -> None: ...
    async def is_ready(self) -> bool: ...

    async def create_session(self, record: SessionRecord, *, max_open: int) -> bool:
        """Insert unless `max_open` sessions exist already; False when full."""
        ...

    async def get_session(self, session_id: str) -> SessionRecord | None: ...
    async def touch_session(self, session_id: str, now: float) -> None: ...
    async def set_log_level(self, session_id: str, level: str) -> None: ...
    async def delete_session(self, session_id: str) -> bool:
        """Delete the session and its events; False if it did not exist."""
        ...

    async def expire_sessions(self, idle_before: float) -> list[str]:
        """Delete sessions last seen before `idle_before`, with their events; return their ids."""
        ...

    async def count_sessions(self, owner: str | None = None) -> int:
        """Open sessions, all of them or one owner's."""
        ...

    async def append_event(self, session_id: str, stream_id: str, seq: int, data: bytes, now: float) -> None: ...
    async def events_after(self, session_id: str, stream_id: str, seq: int) -> list[StoredEvent]: ...
    async def purge_events(self, before: float) -> int: ...
