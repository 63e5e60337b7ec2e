"""Turns on an engine's connections shared fairly between tenants (issue 27, N2).

First come first served let one tenant's sixteen slow listings hold every SQLite reader (or every
pooled PostgreSQL connection) while another tenant's 3-record read waited behind all of them. A
`FairShare` hands out the engine's `capacity` turns so that:

- one tenant holds at most `share` of them at once (`store.tenant_share` of the capacity, at least
  one), so with one busy tenant a turn stays free for everyone else;
- a freed turn goes to the waiting tenant that holds fewest, the one waiting longest among equals,
  so a tenant that holds nothing goes next whoever else queued before it;
- one tenant's own calls keep their order.

Work that belongs to no tenant (sessions, tasks, the executions bookkeeping) queues as one tenant
of its own, `SHARED`. Everything here runs on the event loop, so no lock is needed.

A turn may be waited for at most some seconds (`turn(tenant, wait=...)`): the engines' scan turns
(`store.scan_concurrency`) are, so a listing that cannot start in its time fails like one that ran
too long (docs/store.md, "Scan slots").
"""

from __future__ import annotations

import asyncio
import math
from collections import Counter, deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from aql_mcp.exceptions import StoreError

SHARED = ""
# The part of an engine's connections one tenant may hold when none is configured (`store.tenant_share`).
TENANT_SHARE = 0.5


def tenant_share(capacity: int, fraction: float) -> int:
    """How many of `capacity` turns one tenant may hold: `fraction` of them, at least one."""
    return max(1, min(capacity, math.floor(capacity * fraction)))


class TurnTimedOut(StoreError):
    """No turn came within the wait given to `FairShare.turn`; the caller holds none and left the
    queue. A 503 (retry later) unless the caller answers otherwise, as the records plugin does."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds


class FairShare:
    """At most `capacity` turns at once, at most `share` of them one tenant's."""

    def __init__(self, capacity: int, share: int) -> None:
        self.capacity = capacity
        self.share = max(1, min(share, capacity))
        self._held: Counter[str] = Counter()
        self._busy = 0
        # Waiting tenants in the order they started waiting; each tenant's calls in arrival order.
        self._waiting: dict[str, deque[asyncio.Future[None]]] = {}

    @asynccontextmanager
    async def turn(self, tenant: str = SHARED, *, wait: float | None = None) -> AsyncIterator[None]:
        """Hold one turn for `tenant` while the block runs; wait for it if none is free to this tenant,
        at most `wait` seconds when given (then `TurnTimedOut`)."""
        if wait is None:
            await self._acquire(tenant)
        else:
            try:
                async with asyncio.timeout(wait):
                    await self._acquire(tenant)
            except TimeoutError:
                raise TurnTimedOut(wait) from None
        try:
            yield
        finally:
            self._release(tenant)

    def held(self, tenant: str) -> int:
        return self._held[tenant]

    @property
    def queued(self) -> int:
        """How many calls wait for a turn."""
        return sum(len(queue) for queue in self._waiting.values())

    async def _acquire(self, tenant: str) -> None:
        if tenant not in self._waiting and self._is_free_to(tenant):
            self._take(tenant)
            return
        granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(tenant, deque()).append(granted)
        try:
            await granted
        except asyncio.CancelledError:
            self._withdraw(tenant, granted)
            raise

    def _withdraw(self, tenant: str, granted: asyncio.Future[None]) -> None:
        """A cancelled caller leaves the queue, or gives back the turn it was handed meanwhile."""
        if granted.done() and not granted.cancelled():
            self._release(tenant)
            return
        queue = self._waiting.get(tenant)
        if queue is not None and granted in queue:
            queue.remove(granted)
            if not queue:
                del self._waiting[tenant]

    def _release(self, tenant: str) -> None:
        self._held[tenant] -= 1
        if self._held[tenant] <= 0:
            del self._held[tenant]
        self._busy -= 1
        self._grant()

    def _grant(self) -> None:
        while self._busy < self.capacity:
            tenant = self._next()
            if tenant is None:
                return
            queue = self._waiting.pop(tenant)
            granted = queue.popleft()
            if queue:
                self._waiting[tenant] = queue  # to the back: equals take turns
            self._take(tenant)
            granted.set_result(None)

    def _next(self) -> str | None:
        """The waiting tenant holding fewest turns and still under its share; the first waiting among equals."""
        eligible = [tenant for tenant in self._waiting if self._held[tenant] < self.share]
        return min(eligible, key=self._held.__getitem__, default=None)

    def _is_free_to(self, tenant: str) -> bool:
        return self._busy < self.capacity and self._held[tenant] < self.share

    def _take(self, tenant: str) -> None:
        self._held[tenant] += 1
        self._busy += 1
