"""Deadlines checked by one timer per loop (aql_mcp/timeouts.py): they behave as `asyncio.timeout`
does for the code inside them (a passed deadline cancels the work and comes out as TimeoutError;
anybody else's cancellation stays a cancellation), and a deadline that is left costs no timer."""

from __future__ import annotations

import asyncio

import pytest

from aql_mcp.timeouts import TICK_SECONDS, deadline_after, deadline_at
from tests.support.wait import turn


async def _forever() -> None:
    await asyncio.Event().wait()


def test_a_passed_deadline_cancels_the_work_and_raises_timeout_error() -> None:
    async def run() -> bool:
        deadline = deadline_after(0)
        with pytest.raises(TimeoutError):
            async with deadline:
                await _forever()
        current = asyncio.current_task()
        assert current is not None
        return deadline.expired and current.cancelling() == 0

    assert asyncio.run(run())


def test_work_that_ends_in_time_is_untouched_when_its_deadline_passes_later() -> None:
    async def run() -> tuple[int, bool]:
        when = asyncio.get_running_loop().time() + TICK_SECONDS / 2
        async with deadline_at(when) as left:
            value = 7
        # Another deadline of the same time, still held, times out: the loop's timer has looked
        # past `when`, and the deadline left before it did not fire.
        with pytest.raises(TimeoutError):
            async with deadline_at(when):
                await _forever()
        return value, left.expired

    assert asyncio.run(run()) == (7, False)


def test_no_deadline_never_expires() -> None:
    async def run() -> bool:
        async with deadline_at(None) as deadline:
            await turn()
        return deadline.expired

    assert asyncio.run(run()) is False


async def _cancelled_from_outside(seconds: float) -> bool:
    """A task inside a deadline of `seconds`, cancelled by someone else before the loop's timer looks:
    whether it ended cancelled (not with a TimeoutError)."""

    async def worker(entered: asyncio.Event) -> None:
        async with deadline_after(seconds):
            entered.set()
            await _forever()

    entered = asyncio.Event()
    task = asyncio.create_task(worker(entered))
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    return task.cancelled()


def test_another_cancellation_inside_a_deadline_stays_a_cancellation() -> None:
    assert asyncio.run(_cancelled_from_outside(3600))


def test_a_deadline_that_passes_while_an_outer_cancellation_is_pending_leaves_it_pending() -> None:
    """As asyncio.timeout: the TimeoutError is only ours when no one else cancelled the task too."""
    assert asyncio.run(_cancelled_from_outside(0))


def test_many_deadlines_expire_each_their_own_task_only() -> None:
    async def one(seconds: float) -> str:
        try:
            async with deadline_after(seconds):
                await _forever()
        except TimeoutError:
            return "timed out"
        return "finished"

    async def quick() -> str:
        async with deadline_after(3600):
            await turn()
        return "finished"

    async def run() -> list[str]:
        return list(await asyncio.gather(one(0), quick(), one(0.01), quick()))

    assert asyncio.run(run()) == ["timed out", "finished", "timed out", "finished"]
