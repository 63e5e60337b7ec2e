"""Sessions and events as the store tests make them, on any engine."""

from __future__ import annotations

from aql_mcp.store.base import SessionRecord, Store


def record(session_id: str, *, last_seen: float = 100.0, owner: str = "owner-a") -> SessionRecord:
    return SessionRecord(
        id=session_id,
        owner=owner,
        protocol_version="2025-11-25",
        client_info={"name": "client", "version": "1"},
        client_capabilities={"sampling": {}},
        log_level="info",
        created_at=last_seen,
        last_seen=last_seen,
    )


async def admit(store: Store, session: SessionRecord, *, max_open: int = 10, max_per_owner: int = 10) -> str:
    return await store.create_session(session, max_open=max_open, max_per_owner=max_per_owner)


async def seqs(store: Store, session_id: str, stream_id: str, after: int = 0) -> list[int]:
    return [event.seq for event in await store.events_after(session_id, stream_id, after)]
