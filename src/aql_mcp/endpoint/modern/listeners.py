"""The `subscriptions/listen` streams open on this replica, and what each still has to be told.

A change is offered to every listener here, whichever replica it happened on (endpoint/notifier.py); a
listener keeps the ones its filter wants until its stream writes them. Equal changes not yet
written are kept once: "the tool list changed" twice before the client heard the first says
nothing more, so what a listener holds is bounded by its filter (three lists and its URIs), however
fast changes come and however slowly the client reads. Offering never waits for a client.

The caps are per replica, like the connections they bound: `streams.max_listens` streams in all
and `streams.max_listens_per_principal` for one caller, checked and taken in one step.

A listener holds no event and no timer of its own (docs/connections.md, "What an open stream
costs"): its stream's task waits on the connection and is woken through `waking`; one ticker for
the replica (`Listeners.keepalive`) tells the quiet ones a keep-alive comment is due.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import anyio

from aql_mcp.endpoint.modern.subscription import Change, SubscriptionFilter
from aql_mcp.exceptions import ListenLimitReached, RateLimited
from aql_mcp.jsonrpc.messages import RequestId

RETRY_AFTER = 1


class Listener:
    """One open listen stream: its subscription id (the request's JSON-RPC id), its filter, and the
    changes it has not written yet."""

    __slots__ = ("_pending", "_waker", "due", "last_write", "owner", "stopped", "subscription_id", "wanted")

    def __init__(self, *, owner: str, subscription_id: RequestId, wanted: SubscriptionFilter) -> None:
        self.owner = owner
        self.subscription_id = subscription_id
        self.wanted = wanted
        self.stopped = False
        self.due = False  # a keep-alive comment is due: nothing was written for a while
        self.last_write = time.monotonic()
        self._pending: dict[Change, None] = {}
        self._waker: Callable[[], None] | None = None

    @property
    def ready(self) -> bool:
        """Something to do: changes to write, a keep-alive due, or the end."""
        return bool(self._pending) or self.due or self.stopped

    def offer(self, change: Change) -> None:
        if change.owner and change.owner != self.owner:
            return  # a task's status is for its owner's streams only
        if not self.stopped and self.wanted.wants(change):
            self._pending[change] = None
            self._wake()

    def stop(self) -> None:
        """The server ends the stream (shutdown, or the token expired): the stream writes its closing response."""
        self.stopped = True
        self._wake()

    def tick(self, idle: float, now: float) -> None:
        """The replica's keep-alive ticker: a comment is due once nothing was written for `idle` seconds."""
        if not self.due and now - self.last_write >= idle:
            self.due = True
            self._wake()

    def waking(self, waker: Callable[[], None] | None) -> None:
        """What wakes the task writing this listener's stream when there is something to do."""
        self._waker = waker

    def take(self) -> list[Change]:
        """The changes offered since the last call, in order."""
        changes = list(self._pending)
        self._pending.clear()
        return changes

    async def next_changes(self, quiet: float) -> list[Change]:
        """The changes offered since the last call, in order; empty after `quiet` seconds without
        any (time for a keep-alive) or once stopped. For a task that waits on the listener itself;
        the listen stream waits on its connection instead (endpoint/modern/listen.py)."""
        if not self._pending and not self.stopped:
            woken = asyncio.get_running_loop().create_future()
            self._waker = lambda: None if woken.done() else woken.set_result(None)
            try:
                with anyio.move_on_after(quiet):
                    await woken
            finally:
                self._waker = None
        return self.take()

    def _wake(self) -> None:
        if self._waker is not None:
            self._waker()


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

    def keepalive(self, idle: float) -> None:
        """Tell each stream quiet for `idle` seconds to write a keep-alive comment (lifespan.py runs
        this every `idle / 2` seconds, for the legacy streams too)."""
        now = time.monotonic()
        for listener in list(self._open):
            listener.tick(idle, now)

    def stop_all(self) -> int:
        """Shutting down: every stream ends with its closing response, and no new one opens."""
        self.stopping = True
        for listener in list(self._open):
            listener.stop()
        return len(self._open)

    def _refused(self, kind: str) -> None:
        if self._on_limit is not None:
            self._on_limit(kind)
