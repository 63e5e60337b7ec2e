"""Waiting for what another process or thread does, where there is no event to wait on.

Poll the condition with a deadline: `until` for synchronous tests, `eventually` under anyio
(`arrives` when the condition awaits).
Waiting this way is bounded and ends as soon as the condition holds; a bare sleep is neither.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import anyio

INTERVAL = 0.02
DEADLINE = 10.0


def until(condition: Callable[[], bool], message: str, seconds: float = DEADLINE) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, message
        time.sleep(INTERVAL)


async def eventually(condition: Callable[[], bool], message: str, seconds: float = DEADLINE) -> None:
    with anyio.move_on_after(seconds):
        while not condition():  # noqa: ASYNC110 - the condition is another process's doing: no event to await
            await anyio.sleep(INTERVAL)
        return
    raise AssertionError(message)


async def arrives(condition: Callable[[], Awaitable[bool]], message: str, seconds: float = DEADLINE) -> None:
    """`eventually` for a condition that must itself await (a request to the app in process)."""
    with anyio.move_on_after(seconds):
        while not await condition():  # noqa: ASYNC110 - the condition is the app's doing: no event to await
            await anyio.sleep(INTERVAL)
        return
    raise AssertionError(message)


async def turn(steps: int = 1) -> None:
    """Let the tasks already scheduled run up to their next wait, `steps` times over: no time passes,
    so a test that checks a task is parked (not done) checks it at once, not after a guessed delay."""
    for _ in range(steps):
        await asyncio.sleep(0)
