"""A token bucket: a budget of events per second with a burst, refilled continuously.

The per-caller rate limit (`middleware/rate_limit.py`) and the introspection budget
(`auth/token_introspection.py`) both spend from one. The caller passes the time, so a test drives
it with a clock of its own.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextvars import ContextVar


class TokenBucket:
    """`capacity` tokens, refilled continuously at `rate` tokens per second."""

    __slots__ = ("capacity", "rate", "tokens", "updated")

    def __init__(self, *, capacity: int, rate: float, now: float) -> None:
        self.capacity = capacity
        self.rate = rate
        self.tokens = float(capacity)
        self.updated = now

    def take(self, now: float, cost: int = 1, *, paid: int = 0) -> float:
        """Take `cost` tokens: 0.0 when taken, else the seconds until they can be (nothing taken).

        `paid` is what the same request already took. A total above the capacity is taken once the
        bucket was full and leaves it in debt: the caller then waits until the whole cost is
        refilled. So a batch larger than the burst still runs (with several replicas each holds
        only its share of the burst) but is paid in full."""
        self.tokens = min(self.capacity, self.tokens + (now - self.updated) * self.rate)
        self.updated = now
        needed = min(cost, self.capacity - paid)
        if self.tokens >= needed:
            self.tokens -= cost
            return 0.0
        return (needed - self.tokens) / self.rate

    def is_full(self, now: float) -> bool:
        return self.tokens + (now - self.updated) * self.rate >= self.capacity


class RequestBudget:
    """What one admitted request may still spend of its caller's bucket: it paid `paid` tokens so far
    (the one its admission took), which a cost above the capacity counts against (`TokenBucket.take`)."""

    __slots__ = ("bucket", "clock", "paid")

    def __init__(self, bucket: TokenBucket, clock: Callable[[], float], paid: int = 1) -> None:
        self.bucket = bucket
        self.clock = clock
        self.paid = paid

    def __call__(self, cost: int) -> float:
        """Take `cost` more tokens: 0.0 when taken, else the seconds until they can be."""
        wait = self.bucket.take(self.clock(), cost, paid=self.paid)
        if wait == 0:
            self.paid += cost
        return wait

    @property
    def remaining(self) -> int:
        """Whole tokens left now; 0 while the bucket is in debt."""
        return max(0, math.floor(self.bucket.tokens))


# What the rest of the current request may still spend of its caller's budget: set by the rate
# limiter (middleware/rate_limit.py) for the request it admitted, read where one request does the
# work of several (a batch of MCP-AQL operations, an operation that declares a cost above one). A
# contextvar, so the handler's tasks see the request's own budget without it travelling through
# every signature.
REQUEST_BUDGET: ContextVar[Callable[[int], float] | None] = ContextVar("aql_mcp.request_budget", default=None)


def charge(cost: int) -> float:
    """Take `cost` more tokens for the current request: 0.0 when taken or when no budget applies
    (a call no rate limiter admitted), else the seconds until they are available (nothing taken)."""
    budget = REQUEST_BUDGET.get()
    return 0.0 if budget is None or cost <= 0 else budget(cost)


def remaining() -> int | None:
    """Whole tokens the current request's caller has left; None when no rate limiter admitted it."""
    budget = REQUEST_BUDGET.get()
    return budget.remaining if isinstance(budget, RequestBudget) else None
