"""A token bucket: a budget of events per second with a burst, refilled continuously.

The per-caller rate limit (`middleware/rate_limit.py`) and the introspection budget
(`auth/token_introspection.py`) both spend from one. The caller passes the time, so a test drives
it with a clock of its own.
"""

from __future__ import annotations


class TokenBucket:
    """`capacity` tokens, refilled continuously at `rate` tokens per second."""

    __slots__ = ("capacity", "rate", "tokens", "updated")

    def __init__(self, *, capacity: int, rate: float, now: float) -> None:
        self.capacity = capacity
        self.rate = rate
        self.tokens = float(capacity)
        self.updated = now

    def take(self, now: float) -> float:
        """Take one token: 0.0 when taken, else the seconds until one is available (nothing taken)."""
        self.tokens = min(self.capacity, self.tokens + (now - self.updated) * self.rate)
        self.updated = now
        if self.tokens >= 1:
            self.tokens -= 1
            return 0.0
        return (1 - self.tokens) / self.rate

    def is_full(self, now: float) -> bool:
        return self.tokens + (now - self.updated) * self.rate >= self.capacity
