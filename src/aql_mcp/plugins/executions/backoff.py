"""The worker's retry of a store call refused for a passing reason (docs/executions.md, "Store
errors during a run").

Every engine failure reaches the worker as `StoreError`, the service's "retry later" (503 with
`Retry-After` to a client): SQLite's writer lock still held when the lock timeout ran out
(`LockWaitExpired`), PostgreSQL's lock timeout, serialization failure, deadlock or lost
connection. A client is told to back off and retry; the worker does the same, so a burst of
writers fails no execution. Only the calls that are safe to repeat go through here: a lease-fenced
write either committed (and its repeat changes nothing) or did not happen (plugins/executions/store.py).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import structlog

from aql_mcp.plugin import StoreError

T = TypeVar("T")
log = structlog.get_logger("aql_mcp.executions")
# Doubling from the first wait up to the longest, each shortened by a random share (full jitter,
# so executions refused together do not come back together).
FIRST_DELAY_SECONDS = 0.05
MAX_DELAY_SECONDS = 2.0


async def retrying(
    call: Callable[[], Awaitable[T]],
    *,
    budget: float,
    execution_id: str,
    clock: Callable[[], float] = time.monotonic,
) -> T:
    """`call()`, called again after a `StoreError` until `budget` seconds have passed; the last
    error is raised once they have."""
    deadline = clock() + budget
    delay = FIRST_DELAY_SECONDS
    while True:
        try:
            return await call()
        except StoreError:
            left = deadline - clock()
            if left <= 0:
                raise
            log.info("execution_store_retry", execution_id=execution_id, delay=round(delay, 3))
            await asyncio.sleep(min(left, delay * (0.5 + random.random() / 2)))  # noqa: S311 - jitter, not a secret
            delay = min(delay * 2, MAX_DELAY_SECONDS)
