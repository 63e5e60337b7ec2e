"""Per-principal rate and concurrency limits on the MCP endpoint (corporate §14, Appendix B: -32003 / 429).

Route middleware on `/mcp`, after authentication, so the verified principal is in the scope; callers
without a token share the one key `anonymous`. Every request, whatever its method, takes one token
from the principal's bucket (`burst` tokens, refilled at `rate_per_second`); an empty bucket is 429
with `Retry-After` set to the whole seconds until a token is back. A POST also takes a concurrency
slot until the app returns, raises or is cancelled; one over `max_concurrent` is 429 with
`Retry-After: 1`. A request that does the work of several pays for the rest from the same bucket while it
runs (`bucket.charge`: a batch pays the cost of each MCP-AQL operation in it, operations/cost.py). One
slot is one operation in flight: a batch runs its operations one after another, never two at once.
Each 429 names the budget it found spent in `data.budget` (`rate` or `concurrency`). A GET stream can stay open for
hours, so it pays its token but holds no slot; so does a modern `subscriptions/listen` POST, whose
streams endpoint/modern/listeners.py caps instead. It is told by its `Mcp-Method` header and a
modern `MCP-Protocol-Version`: only the modern edge checks that header against the body (and refuses
a mismatch), so a legacy request naming it still takes a slot. The buckets live in process: a
database round trip per request would cost more than the request. With several replicas each one
enforces its share of the budget: `rate / n` and `ceil(burst / n)` for `n` live replicas
(`ReplicaShare`, kept current from the store's heartbeat), so a caller spread over all of them by
the gateway gets the configured budget, plus at most `n - 1` for the rounding (docs/store.md, "Rate
limits with several replicas").
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from starlette.types import ASGIApp, Receive, Scope, Send

from aql_mcp.auth.principal import principal_key
from aql_mcp.bucket import REQUEST_BUDGET, RequestBudget, TokenBucket
from aql_mcp.exceptions import RateLimited
from aql_mcp.protocol.versions import Era, era_of
from aql_mcp.responses import send_error
from aql_mcp.scope import header, principal_of, request_id_of

METHOD_HEADER = b"mcp-method"
VERSION_HEADER = b"mcp-protocol-version"
LISTEN = "subscriptions/listen"
# The bucket table is swept when it reaches this many keys (and again each time it doubles).
SWEEP_AT = 10_000

log = structlog.get_logger("aql_mcp.rate_limit")


class ReplicaShare:
    """How many replicas share each caller's budget; the app's heartbeat keeps it current."""

    __slots__ = ("replicas",)

    def __init__(self, replicas: int = 1) -> None:
        self.replicas = replicas


class RateLimitMiddleware:
    def __init__(
        self,
        app: ASGIApp,
        *,
        rate_per_second: float,
        burst: int,
        max_concurrent: int,
        share: ReplicaShare | None = None,
        clock: Callable[[], float] = time.monotonic,
        on_refusal: Callable[[str], None] | None = None,
        on_audit: Callable[[str, str, str], None] | None = None,
    ) -> None:
        self.app = app
        self.on_refusal = on_refusal
        # Told (budget, principal key, path) of each 429: the app audits it (docs/audit.md, `rate_limit`).
        self.on_audit = on_audit
        self.total_rate = rate_per_second
        self.total_burst = burst
        self.share = share or ReplicaShare()
        self.replicas = self.share.replicas
        self.rate = rate_per_second / self.replicas
        self.burst = math.ceil(burst / self.replicas)
        self.max_concurrent = max_concurrent
        self.clock = clock
        self.buckets: dict[str, TokenBucket] = {}
        self.in_flight: dict[str, int] = {}
        self.sweep_at = SWEEP_AT

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        # Returns the next app's awaitable where nothing is counted in flight (a GET or listen
        # stream): a held stream keeps no frame here (docs/connections.md, "What an open stream costs").
        if scope["type"] != "http":
            return self.app(scope, receive, send)
        key = principal_key(principal_of(scope))
        now = self.clock()
        bucket = self._bucket(key, now)
        wait = bucket.take(now)
        if wait > 0:
            spent = _spent("rate", bucket.capacity, max(0, math.floor(bucket.tokens)))
            return self._refuse(scope, send, key, "rate", RateLimited(retry_after=max(1, math.ceil(wait)), data=spent))
        if scope["method"] != "POST" or _is_listen(scope):
            return self.app(scope, receive, send)
        return self._counted(scope, receive, send, key, bucket)

    async def _counted(self, scope: Scope, receive: Receive, send: Send, key: str, bucket: TokenBucket) -> None:
        """A call: under the cap on calls in flight, counted while it runs, its budget in the context.
        Checked and counted here, where it is released, in one step of the task that runs it."""
        if self.in_flight.get(key, 0) >= self.max_concurrent:
            spent = _spent("concurrency", self.max_concurrent, 0)
            error = RateLimited("Too many concurrent calls; retry later", retry_after=1, data=spent)
            await self._refuse(scope, send, key, "concurrency", error)
            return
        self.in_flight[key] = self.in_flight.get(key, 0) + 1
        budget = REQUEST_BUDGET.set(RequestBudget(bucket, self.clock))
        try:
            await self.app(scope, receive, send)
        finally:
            REQUEST_BUDGET.reset(budget)
            self._release(key)

    def _bucket(self, key: str, now: float) -> TokenBucket:
        if self.share.replicas != self.replicas:
            self._reshare()
        bucket = self.buckets.get(key)
        if bucket is None:
            if len(self.buckets) >= self.sweep_at:
                self._sweep(now)
            bucket = self.buckets[key] = TokenBucket(capacity=self.burst, rate=self.rate, now=now)
        return bucket

    def _reshare(self) -> None:
        """The replica count changed: every bucket takes the new share (tokens held are capped to it)."""
        self.replicas = max(1, self.share.replicas)
        self.rate = self.total_rate / self.replicas
        self.burst = math.ceil(self.total_burst / self.replicas)
        for bucket in self.buckets.values():
            bucket.rate, bucket.capacity = self.rate, self.burst
            bucket.tokens = min(bucket.tokens, self.burst)

    def _sweep(self, now: float) -> None:
        # A full bucket is exactly what a new one would be, so dropping it forgets nothing; the table
        # then holds only principals seen within the last `burst / rate` seconds. The next sweep
        # waits until the table doubles, so a crowd of active principals costs O(1) per request.
        self.buckets = {key: bucket for key, bucket in self.buckets.items() if not bucket.is_full(now)}
        self.sweep_at = max(SWEEP_AT, 2 * len(self.buckets))

    def _release(self, key: str) -> None:
        count = self.in_flight[key] - 1
        if count:
            self.in_flight[key] = count
        else:
            del self.in_flight[key]

    async def _refuse(self, scope: Scope, send: Send, key: str, reason: str, error: RateLimited) -> None:
        request_id = request_id_of(scope)
        # The key is the subject's digest, never the subject or the token (corporate §15.2).
        log.info("rate_limited", reason=reason, principal=key, request_id=request_id)
        if self.on_refusal is not None:
            self.on_refusal(reason)
        if self.on_audit is not None:
            self.on_audit(reason, key, scope["path"])
        await send_error(send, error, request_id=request_id)


def _spent(budget: str, limit: int, remaining: int) -> dict[str, Any]:
    """What a 429 says of the budget it found spent (docs/errors.md, "Rate limits"): `rate` (this
    replica's share of the burst is `limit`) or `concurrency` (calls in flight at once); a request
    the limiter refuses asked for one unit, before its body (and its MCP-AQL cost) was read."""
    return {"budget": budget, "cost": 1, "remaining": remaining, "limit": limit}


def _is_listen(scope: Scope) -> bool:
    """A modern `subscriptions/listen` request, by its headers (the body is not read here)."""
    if (header(scope, METHOD_HEADER) or "").strip() != LISTEN:
        return False
    return era_of((header(scope, VERSION_HEADER) or "").strip()) is Era.MODERN
