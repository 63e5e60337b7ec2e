"""The store interface: everything that must outlive a request goes through it.

Engines implement `Store` (SQLite in `store/sqlite/`, PostgreSQL in `store/postgres/`) and
`open_store(settings)` in `store/factory.py` picks one; callers never learn which is underneath,
and this module imports neither.

The contract every engine keeps (docs/store.md):
- every method is one atomic unit: it commits whole or changes nothing;
- a cap or quota is checked and applied in the same transaction as the write it guards, inside the
  engine, so two replicas racing for the last slot cannot both win;
- event sequence numbers are allocated by the engine, per stream, gap-free and never reused;
- a failure of the engine itself raises `StoreError` (503), with its detail in the log only; it
  stays on the call that met it: a lock held elsewhere is waited for at most `store.lock_timeout_seconds`,
  and the engine serves again by itself once the cause is gone (docs/store.md, "When the store
  cannot write");
- `is_writable()` commits one tiny write within `PROBE_SECONDS`: `/ready` uses it, so a replica
  that cannot write (full disk, read-only file or database, a lock held elsewhere) leaves the rotation;
- `bus` carries signals between the replicas sharing the engine (a cancellation, a client's
  answer, a session's end, new events on a stream, a change for the listen streams); the tables
  stay the truth and a lost wake-up is made good by `Signal.RESYNC` after the bus reconnects.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Protocol

from aql_mcp.store.audit import AuditStore
from aql_mcp.store.confirmations import ConfirmationStore
from aql_mcp.store.plugin_tables import F, Tables
from aql_mcp.store.principals import PrincipalDirectory
from aql_mcp.store.revocations import RevocationStore
from aql_mcp.store.tasks import TaskStore


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


# The write probe's budget, lock wait included: well under the readiness probe's timeout (the
# chart's is 2 s), with the read check beside it.
PROBE_SECONDS = 0.5

SessionAdmission = Literal["created", "table_full", "owner_full"]


@dataclass(frozen=True, slots=True)
class StoredEvent:
    seq: int
    data: bytes


@dataclass(frozen=True, slots=True)
class StreamOrigin:
    """Where a stream comes from: the replica running its request, and that request's JSON id."""

    replica: str
    request: str


SignalKind = Literal["events", "cancel", "response", "session_ended", "broadcast", "resync"]


@dataclass(frozen=True, slots=True)
class Signal:
    """Something one replica tells the others about a session.

    - `events`: stream `target` of the session has new events in the store (a wake-up only);
    - `cancel`: stop request `target` (its JSON-RPC id as JSON) wherever it runs;
    - `response`: the client answered server request `target`; `payload` is the JSON-RPC response;
    - `session_ended`: the session was deleted or expired: forget it;
    - `broadcast`: for every replica, no session: notification `target` (a list changed, with
      `payload` the UTF-8 URI of a resource updated, or for `notifications/tasks` the JSON task id
      and owner of a task whose status changed) for the `subscriptions/listen` streams each holds,
      and a list change for the GET streams too (endpoint/notifier.py);
    - `resync`: the bus reconnected and may have missed wake-ups: catch up every open stream.
    """

    RESYNC: ClassVar[Signal]

    kind: SignalKind
    session_id: str = ""
    target: str = ""
    payload: bytes = b""


Signal.RESYNC = Signal("resync")
SignalHandler = Callable[[Signal], Awaitable[None]]


class Bus(Protocol):
    """Signals between replicas, and who the replicas are. One replica (SQLite) has nobody to tell."""

    def listen(self, handler: SignalHandler) -> None:
        """Where this replica's incoming signals go (set once, before `open`)."""
        ...

    async def publish(self, signal: Signal) -> None:
        """Tell the other replicas; `events` wake-ups may be batched, the others are stored first."""
        ...

    async def gone(self, replica: str) -> bool:
        """Whether `replica` stopped sending heartbeats, judged by the store's clock."""
        ...

    async def heartbeat(self, now: float) -> int:
        """Record that this replica is alive; return how many replicas are (this one included)."""
        ...


class Store(Protocol):
    """Sessions and the SSE event log, and the facets the core uses (confirmation tokens, revoked
    tokens, principals, tasks, the audit trail); a plugin's own tables are reached through `tables`. Every write is
    atomic; a failed write changes nothing."""

    @property
    def confirmations(self) -> ConfirmationStore: ...
    @property
    def revocations(self) -> RevocationStore: ...
    @property
    def principals(self) -> PrincipalDirectory: ...
    @property
    def tasks(self) -> TaskStore: ...
    @property
    def audit(self) -> AuditStore:
        """The audit trail's append-only tables (store/audit.py, docs/audit.md)."""
        ...

    @property
    def bus(self) -> Bus: ...

    def tables(self, declared: Tables[F]) -> F:
        """The facet of a plugin's own tables on this store's engine (store/plugin_tables.py): declared
        before `open`, which migrates them; the same object on every call."""
        ...

    async def open(self) -> None: ...
    async def close(self) -> None: ...
    async def is_ready(self) -> bool: ...
    async def is_writable(self) -> bool:
        """Whether a write commits now: this replica's row in `replicas` rewritten in one short
        transaction, within `PROBE_SECONDS`. False on any failure, never an exception."""
        ...

    async def create_session(self, record: SessionRecord, *, max_open: int, max_per_owner: int) -> SessionAdmission:
        """Insert unless `max_open` sessions exist, or `max_per_owner` of this owner's; checked and
        inserted atomically."""
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

    async def expire_session_records(self, idle_before: float) -> list[SessionRecord]:
        """`expire_sessions`, returning the records as they were: whichever replica's sweep deletes a
        session measures it, holding a copy or not (`mcp.server.session.duration`)."""
        ...

    async def count_sessions(self, owner: str | None = None) -> int:
        """Open sessions, all of them or one owner's."""
        ...

    async def append_event(
        self, session_id: str, stream_id: str, data: bytes, now: float, *, final: bool = False, request: str = ""
    ) -> int:
        """Log one event on the stream; return its sequence number (1, 2, ... per stream). `final`
        (a request's response) also ends the stream. With PostgreSQL, the stream's first event also
        records this replica and `request`, the JSON id of the request a POST stream answers
        (`stream_origin`)."""
        ...

    async def stream_origin(self, session_id: str, stream_id: str) -> StreamOrigin | None:
        """The replica that wrote the stream's first event and the request it answers, while the
        stream has not ended; None otherwise, and always with one replica (SQLite)."""
        ...

    async def end_stream(self, session_id: str, stream_id: str) -> None:
        """Nothing more will come on the stream (its request was cancelled); resuming it answers 410."""
        ...

    async def events_after(self, session_id: str, stream_id: str, seq: int) -> list[StoredEvent]: ...
    async def stream_position(self, session_id: str, stream_id: str) -> tuple[int, bool]:
        """The number of the stream's newest event (0 for a stream with none; purged ones count) and
        whether the stream has ended."""
        ...

    async def purge_events(self, before: float) -> int: ...
    async def subscribe(self, session_id: str, uri: str) -> None:
        """`resources/subscribe`: kept with the session, so whichever replica changes `uri` finds it."""
        ...

    async def unsubscribe(self, session_id: str, uri: str) -> None: ...
    async def subscribers(self, uri: str) -> list[str]:
        """The sessions subscribed to `uri`."""
        ...
