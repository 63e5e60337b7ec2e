"""A connection's deadlines (server/deadline.py): one timer per loop runs them out, each at most
`TICK_SECONDS` late; a disarmed or replaced deadline never fires, `keep` keeps the running time,
and a failing callback neither stops the others nor the wheel."""

from __future__ import annotations

import asyncio

from aql_mcp.server.deadline import TICK_SECONDS, Deadline


async def _after(seconds: float) -> None:
    """Let the loop run for `seconds` (the wheel's own timer is what the test watches)."""
    done = asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().call_later(seconds, done.set_result, None)
    await done


def test_a_deadline_runs_out_once_and_a_disarmed_one_never() -> None:
    async def run() -> list[str]:
        loop = asyncio.get_running_loop()
        fired: list[str] = []
        first, second, third = Deadline(loop), Deadline(loop), Deadline(loop)
        first.arm("idle", 0.0, lambda: fired.append("first"))
        second.arm("head", 0.0, lambda: fired.append("second"))
        third.arm("idle", 0.0, lambda: fired.append("third"))
        second.disarm()
        third.arm("drain", 3600, lambda: fired.append("replaced"))  # another phase replaces it
        await _after(TICK_SECONDS * 3)
        third.disarm()
        return fired

    assert asyncio.run(run()) == ["first"]


def test_keep_leaves_a_running_deadline_of_the_same_phase_alone() -> None:
    async def run() -> tuple[list[str], str]:
        loop = asyncio.get_running_loop()
        fired: list[str] = []
        head = Deadline(loop)
        head.arm("head", 0.0, lambda: fired.append("head"))
        head.arm("head", 3600, lambda: fired.append("late"), keep=True)  # trickled bytes: no extension
        await _after(TICK_SECONDS * 3)
        return fired, head.phase

    # The phase stays until the state changes (connection.py reads it after the deadline ran out).
    assert asyncio.run(run()) == (["head"], "head")


def test_a_failing_callback_is_reported_and_the_others_still_run_out() -> None:
    async def run() -> tuple[list[str], list[str]]:
        loop = asyncio.get_running_loop()
        reported: list[str] = []
        loop.set_exception_handler(lambda _loop, context: reported.append(context["message"]))
        fired: list[str] = []

        def fail() -> None:
            raise RuntimeError("boom")

        broken, fine = Deadline(loop), Deadline(loop)
        broken.arm("idle", 0.0, fail)
        fine.arm("idle", 0.0, lambda: fired.append("fine"))
        await _after(TICK_SECONDS * 3)
        later = Deadline(loop)  # the wheel still runs after the failure
        later.arm("idle", 0.0, lambda: fired.append("later"))
        await _after(TICK_SECONDS * 3)
        return fired, reported

    assert asyncio.run(run()) == (["fine", "later"], ["connection deadline failed"])
