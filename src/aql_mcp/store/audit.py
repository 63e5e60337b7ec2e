"""The audit trail's two tables: records in hash chains, and the checkpoints that anchor them
(docs/audit.md).

Both are append-only in the database itself: triggers refuse an UPDATE of either and a DELETE of a
checkpoint; a record may be deleted only once a `prune` checkpoint covers it (its chain, and a
sequence number at least its own), which is what `prune` writes first, in the same transaction.
What a record holds and how its hash is made is the audit package's business (aql_mcp/audit/); the
engines store rows, find a chain's head and take turns on a chain.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar, cast

# The hash a chain with nothing before it starts from.
GENESIS = "0" * 64
# The columns of `audit_records` a row carries, in this order, `id` excepted.
COLUMNS = (
    "chain",
    "seq",
    "recorded_at",
    "replica",
    "request_id",
    "trace_id",
    "subject",
    "actors",
    "tenant",
    "era",
    "tool",
    "operation",
    "kind",
    "outcome",
    "code",
    "params_digest",
    "resource_id",
    "prev_hash",
    "hash",
)


@dataclass(frozen=True, slots=True)
class AuditRow:
    """One stored record. `actors` is a JSON array of digests; `recorded_at` ISO 8601 UTC with
    microseconds, so text order is time order; `id` orders the whole table (0 before it is stored)."""

    chain: str
    seq: int
    recorded_at: str
    replica: str
    request_id: str | None
    trace_id: str | None
    subject: str
    actors: str
    tenant: str | None
    era: str | None
    tool: str | None
    operation: str
    kind: str
    outcome: str
    code: str | None
    params_digest: str | None
    resource_id: str | None
    prev_hash: str
    hash: str
    id: int = 0

    def values(self) -> tuple[object, ...]:
        """The row's columns in `COLUMNS` order."""
        return tuple(getattr(self, column) for column in COLUMNS)


@dataclass(frozen=True, slots=True)
class ChainHead:
    """Where a chain ends now: the sequence number and hash the next record follows."""

    seq: int
    hash: str


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """`anchor`: a chain starts after `hash` (the last hash of the replica's previous chain, or
    GENESIS) at `seq` 0. `prune`: records of `chain` up to `seq`, written before `pruned_before`,
    were deleted; `hash` is the last one's."""

    chain: str
    seq: int
    hash: str
    reason: str
    recorded_at: str
    pruned_before: str | None = None


@dataclass(frozen=True, slots=True)
class AuditQuery:
    """What the console filters the trail by (docs/console.md, "The audit trail"): each field that is
    set must match exactly (`since` included, `until` excluded, ISO 8601 UTC)."""

    resource_id: str | None = None
    subject: str | None = None
    kind: str | None = None
    outcome: str | None = None
    since: str | None = None
    until: str | None = None

    def values(self) -> tuple[str | None, ...]:
        return (self.resource_id, self.subject, self.kind, self.outcome, self.since, self.until)


W = TypeVar("W")


class Writers:
    """The writers queueing records for one store in this process (the audit package's
    `AuditTrail`s: the one the service shares, `one`, and any a test or command makes of its own).
    Closing the store first waits for what each has queued: a record queued
    without waiting (a read, a refusal, a worker's state change) is written at shutdown, not lost
    with the process (docs/audit.md, "Writing")."""

    def __init__(self) -> None:
        self._drains: list[Callable[[], Awaitable[None]]] = []
        self._shared: object | None = None

    def one(self, make: Callable[[], W]) -> W:
        """The writer every part of the service shares for this store, made by `make` on first use."""
        if self._shared is None:
            self._shared = make()
        return cast(W, self._shared)

    def add(self, drain: Callable[[], Awaitable[None]]) -> None:
        self._drains.append(drain)

    async def drain(self) -> None:
        for drain in self._drains:
            await drain()


# Given the heads of the chains a batch writes to, the batch's rows, sealed onto them.
Seal = Callable[[Mapping[str, ChainHead]], Sequence[AuditRow]]


class AuditStore(Protocol):
    """The audit tables of one store (docs/audit.md, "Storage")."""

    @property
    def replica(self) -> str:
        """This replica's name, as in the `replicas` table: part of its chains' ids."""
        ...

    @property
    def writers(self) -> Writers:
        """Who queues records for these tables: the store drains them before it closes."""
        ...

    async def append(self, chains: Sequence[str], seal: Seal, *, now: str) -> None:
        """In one transaction: take this process's turn on each of `chains` (another writer of the
        same chain waits; other chains do not), find each head (its last record, else its newest
        checkpoint, else a new `anchor` checkpoint written at `now` after the replica's previous
        chain), and insert what `seal` makes of them."""
        ...

    async def records(
        self, *, since: str | None = None, until: str | None = None, after_id: int = 0, limit: int = 1000
    ) -> list[AuditRow]:
        """Records with `id` above `after_id`, written at or after `since` and before `until`, by id."""
        ...

    async def find(self, query: AuditQuery, *, limit: int) -> list[AuditRow]:
        """At most `limit` records matching `query`, newest first (by id)."""
        ...

    async def chain(self, chain: str, *, after_seq: int, limit: int) -> list[AuditRow]:
        """One chain's records with `seq` above `after_seq`, by sequence number."""
        ...

    async def chains(self) -> list[str]:
        """Every chain that has records or checkpoints."""
        ...

    async def checkpoints(self) -> list[Checkpoint]: ...

    async def prune(self, before: str, *, now: str) -> int:
        """Delete each chain's records up to the last one written before `before` (a prefix of the
        chain), after writing the `prune` checkpoint that names it; how many were deleted."""
        ...
