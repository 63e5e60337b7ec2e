"""src/aql_mcp/endpoint/flag.py: the event every open stream and connection holds, with the
semantics of `asyncio.Event` (set, clear, wait) and no waiter list until something waits."""

from __future__ import annotations

import asyncio

import pytest

from aql_mcp.endpoint.flag import Flag
from tests.support.wait import turn

pytestmark = pytest.mark.anyio


async def test_a_set_flag_is_waited_for_at_once_and_a_cleared_one_waits_again() -> None:
    flag = Flag()
    assert not flag.is_set()
    flag.set()
    assert flag.is_set()
    assert await asyncio.wait_for(flag.wait(), 1) is True
    flag.clear()
    assert not flag.is_set()
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(flag.wait(), 0.05)


async def test_every_waiter_wakes_when_it_is_set() -> None:
    flag = Flag()
    waiters = [asyncio.ensure_future(flag.wait()) for _ in range(3)]
    await turn()
    assert not any(waiter.done() for waiter in waiters)
    flag.set()
    assert await asyncio.wait_for(asyncio.gather(*waiters), 1) == [True, True, True]


async def test_a_cancelled_waiter_leaves_the_others_waiting() -> None:
    """As with `asyncio.Event`: one waiter's cancellation (a timeout) is its own."""
    flag = Flag()
    cancelled = asyncio.ensure_future(flag.wait())
    waiting = asyncio.ensure_future(flag.wait())
    await turn()
    cancelled.cancel()
    await turn()
    assert cancelled.cancelled()
    assert not waiting.done()
    flag.set()
    assert await asyncio.wait_for(waiting, 1) is True


def test_a_flag_made_set_starts_set() -> None:
    """uvicorn's flow control starts writable (server/connection.py)."""
    assert Flag(True).is_set()
