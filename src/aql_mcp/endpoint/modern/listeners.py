"""The `subscriptions/listen` streams open on this replica, and what each still has to be told.

A change is offered to every listener here, whichever replica it happened on (endpoint/notifier.py); a
listener keeps the ones its filter wants until its stream writes them. Equal changes not yet
written are kept once: "the tool list changed" twice before the client heard the first says
nothing more, so what a listener holds is bounded by its filter (three lists and its URIs), however
fast changes come and however slowly the client reads. Offering never waits for a client.

The caps are per replica, like the connections they bound: `streams.max_listens` streams in all
and `streams.max_listens_per_principal` for one caller, checked and taken in one step.
"""

from __future__ import annotations

from collections.abc import Callable

import anyio

from aql_mcp.endpoint.modern.subscription import Change, SubscriptionFilter
from aql_mcp.exceptions import ListenLimitReached, RateLimited
from aql_mcp.jsonrpc.messages import RequestId

RETRY_AFTER = 1


class Listener:
    """One open listen stream: its subscription id (the request's JSON-RPC id), its filter, and the
    changes it has not written yet."""

    __slots__ = ("_pending", "_wake", "owner", "stopped", "subscription_id", "wanted")

    def __init__(self, *, owner: str, subscription_id: RequestId, wanted: SubscriptionFilter) -> None:
        self.owner = owner
        self.subscription_id = subscription_id
        self.wanted = wanted
        self.stopped = False
        self._pending: dict[Change, None] = {}
        self._wake = anyio.Event()

    def offer(self, change: Change) -> None:
        if change.owner and change.owner != self.owner:
            return  # a task's status is for its owner's streams only
        if not self.stopped and self.wanted.wants(change):
            self._pending[change] = None
            self._wake.set()

    def stop(self) -> None:
        """The server ends the stream (shutdown): the stream writes its closing response."""
        self.stopped = True
        self._wake.set()

    async def next_changes(self, quiet: float) -> list[Change]:
        """The changes offered since the last call, in order; empty after `quiet` seconds without
        any (time for a keep-alive) or once stopped."""
        with anyio.move_on_after(quiet):
            await self._wake.wait()
        self._wake = anyio.Event()
        changes, self._pending = list(self._pending), {}
        return changes


class Listeners:
    """This replica's open listen streams, under the caps; `on_limit` counts refusals (metrics)."""

    def __init__(self, *, max_open: int, max_per_owner: int, on_limit: Callable[[str], None] | None = None) -> None:
        self._max_open = max_open
        self._max_per_owner = max_per_owner
        self._on_limit = on_limit
        self._open: set[Listener] = set()
        self._per_owner: dict[str, int] = {}
        self.stopping = False

    def __len__(self) -> int:
        return len(self._open)

    def admit(self, listener: Listener) -> None:
        """Count `listener` in, or refuse: 429 -32003 past the caller's cap, 503 -32006 past the
        replica's (both with Retry-After), 503 once the replica is stopping."""
        if self.stopping:
            raise ListenLimitReached(retry_after=RETRY_AFTER)
        held = self._per_owner.get(listener.owner, 0)
        if held >= self._max_per_owner:
            self._refused("listens")
            message = "Rate limited: too many open subscription streams for this caller"
            raise RateLimited(message, retry_after=RETRY_AFTER)
        if len(self._open) >= self._max_open:
            self._refused("listen_table")
            raise ListenLimitReached(retry_after=RETRY_AFTER)
        self._open.add(listener)
        self._per_owner[listener.owner] = held + 1

    def release(self, listener: Listener) -> None:
        if listener not in self._open:
            return
        self._open.discard(listener)
        held = self._per_owner[listener.owner] - 1
        if held:
            self._per_owner[listener.owner] = held
        else:
            del self._per_owner[listener.owner]

    def deliver(self, change: Change) -> None:
        for listener in list(self._open):
            listener.offer(change)

    def stop_all(self) -> int:
        """Shutting down: every stream ends with its closing response, and no new one opens."""
        self.stopping = True
        for listener in list(self._open):
            listener.stop()
        return len(self._open)

    def _refused(self, kind: str) -> None:
        if self._on_limit is not None:
            self._on_limit(kind)
