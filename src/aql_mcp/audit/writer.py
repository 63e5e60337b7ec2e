"""The audit writer: a bounded queue of entries written in batches, one transaction each
(docs/audit.md, "Writing").

An entry queued now is written by the flusher after the current event-loop turn, together with
every entry queued meanwhile (at most `batch_size` per transaction), so a burst of calls costs one
round trip, not one each. `append` returns once the batch holding its entry committed: a write
operation's reply waits for it, so no write is acknowledged without its record. `offer` (a read)
never waits: when the queue is full the entry is dropped and counted. `append` waits for room
instead, which slows the writers down to the pace of the store (backpressure).

A batch the store refuses fails every `append` waiting for it with the store's error (the call is
answered 503, not acknowledged) and its reads are counted as dropped.
"""

from __future__ import annotations

import asyncio
import weakref
from collections import deque
from collections.abc import Callable, Sequence

import structlog
from prometheus_client import CollectorRegistry, Counter

from aql_mcp.audit.record import AuditEntry, seal, timestamp
from aql_mcp.store.audit import AuditStore

log = structlog.get_logger("aql_mcp.audit")
QUEUE_CAPACITY = 4096
BATCH_SIZE = 256

Pending = tuple[AuditEntry, "asyncio.Future[None] | None"]


class AuditTrail:
    """The writer of one store's audit tables for this process."""

    def __init__(
        self,
        store: AuditStore,
        *,
        capacity: int = QUEUE_CAPACITY,
        batch_size: int = BATCH_SIZE,
        on_drop: Callable[[int], None] | None = None,
    ) -> None:
        self.store = store
        self._capacity = capacity
        self._batch_size = batch_size
        self._on_drop = on_drop
        self._queue: deque[Pending] = deque()
        self._room: deque[asyncio.Future[None]] = deque()
        self._flusher: asyncio.Task[None] | None = None
        self.dropped = 0
        store.writers.add(self.drain)

    def count_drops(self, on_drop: Callable[[int], None]) -> None:
        """Count drops with `on_drop` unless a counter is set already."""
        if self._on_drop is None:
            self._on_drop = on_drop

    def offer(self, entry: AuditEntry) -> None:
        """Queue a read's entry unless the queue is full (then it is dropped and counted)."""
        if len(self._queue) >= self._capacity:
            self._drop(1)
            return
        self._queue.append((entry, None))
        self._start()

    def put(self, entry: AuditEntry) -> None:
        """Queue an entry from code that cannot wait, even past the queue's bound (`AuditLog.event`)."""
        self._queue.append((entry, None))
        self._start()

    async def append(self, entry: AuditEntry) -> None:
        """Queue an entry, waiting for room, and return once it is committed."""
        loop = asyncio.get_running_loop()
        while len(self._queue) >= self._capacity:
            room = loop.create_future()
            self._room.append(room)
            await room
        done: asyncio.Future[None] = loop.create_future()
        # A caller cancelled while it waits never reads the outcome: read here, so a failed batch
        # is not reported again as an exception nobody retrieved.
        done.add_done_callback(_retrieved)
        self._queue.append((entry, done))
        self._start()
        # Shielded: a caller cancelled meanwhile leaves its entry to be written all the same.
        await asyncio.shield(done)

    async def drain(self) -> None:
        """Wait until every entry queued so far is written (or failed)."""
        while self._flusher is not None and not self._flusher.done():
            await asyncio.shield(self._flusher)

    def _start(self) -> None:
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.get_running_loop().create_task(self._flush())

    async def _flush(self) -> None:
        await asyncio.sleep(0)  # one loop turn: the entries its other callbacks queue join this batch
        while self._queue:
            batch = [self._queue.popleft() for _ in range(min(len(self._queue), self._batch_size))]
            self._make_room()
            try:
                await self._write([entry for entry, _ in batch])
            except Exception as exc:
                log.error("audit_write_failed", records=len(batch), error=type(exc).__name__)
                self._drop(sum(1 for _, done in batch if done is None))
                _settle(batch, exc)
            else:
                _settle(batch, None)

    async def _write(self, entries: Sequence[AuditEntry]) -> None:
        replica = self.store.replica
        chains = sorted({entry.chain(replica) for entry in entries})
        await self.store.append(chains, lambda heads: seal(entries, heads, replica), now=timestamp())

    def _make_room(self) -> None:
        while self._room and len(self._queue) < self._capacity:
            room = self._room.popleft()
            if not room.done():
                room.set_result(None)

    def _drop(self, count: int) -> None:
        if count:
            self.dropped += count
            if self._on_drop is not None:
                self._on_drop(count)


def _settle(batch: Sequence[Pending], error: BaseException | None) -> None:
    for _, done in batch:
        if done is None or done.done():
            continue
        if error is None:
            done.set_result(None)
        else:
            done.set_exception(error)


def _retrieved(done: asyncio.Future[None]) -> None:
    if not done.cancelled():
        done.exception()


def dropped_records_counter(registry: CollectorRegistry) -> Callable[[int], None]:
    """`aql_mcp_audit_dropped_records_total` on `registry`: droppable records (reads, rate-limit
    refusals, authentication failures) the full queue turned away (docs/audit.md, "Writing";
    docs/monitoring.md). One counter per registry, whichever writer asks for it."""
    counter = _DROPPED.get(registry)
    if counter is None:
        counter = _DROPPED[registry] = Counter(
            "aql_mcp_audit_dropped_records_total",
            "Droppable audit records (reads, rate-limit refusals, authentication failures) dropped because the "
            "audit queue was full, or their batch failed.",
            registry=registry,
        )
    return counter.inc


# Each app's registry has its counter once, though several writers (the router's, the guards') count.
_DROPPED: weakref.WeakKeyDictionary[CollectorRegistry, Counter] = weakref.WeakKeyDictionary()


def shared_trail(store: AuditStore, *, on_drop: Callable[[int], None] | None = None) -> AuditTrail:
    """The process's one writer for `store`, made on first use. The router, the guards, the console
    and the plugins each build an audit log; sharing the queue makes their records of one moment one
    batch, one round trip. `on_drop` counts its drops unless an earlier caller gave a counter."""
    trail = store.writers.one(lambda: AuditTrail(store))
    if on_drop is not None:
        trail.count_drops(on_drop)
    return trail
