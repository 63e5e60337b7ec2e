"""A connection's deadlines (server/deadline.py): one timer per loop runs them out, a bucket of
`TICK_SECONDS` at a time; a disarmed or replaced deadline never fires, `keep` keeps the running
time, and a failing callback neither stops the others nor the wheel.

Deadlines armed together for 0 s share a bucket, which the wheel runs out in one step: once the
one that must fire has fired, the others would have too."""

from __future__ import annotations

import asyncio

from aql_mcp.server.deadline import Deadline


def test_a_deadline_runs_out_once_and_a_disarmed_or_replaced_one_never() -> None:
    async def run() -> list[str]:
        loop = asyncio.get_running_loop()
        fired: list[str] = []
        done = asyncio.Event()
        first, second, third = Deadline(loop), Deadline(loop), Deadline(loop)
        second.arm("head", 0.0, lambda: fired.append("second"))
        third.arm("idle", 0.0, lambda: fired.append("third"))
        first.arm("idle", 0.0, lambda: (fired.append("first"), done.set()))
        second.disarm()
        third.arm("drain", 3600, lambda: fired.append("replaced"))  # another phase replaces it
        await done.wait()
        third.disarm()
        return fired

    assert asyncio.run(run()) == ["first"]


def test_keep_leaves_a_running_deadline_of_the_same_phase_alone() -> None:
    async def run() -> tuple[list[str], str]:
        loop = asyncio.get_running_loop()
        fired: list[str] = []
        done = asyncio.Event()
        head = Deadline(loop)
        head.arm("head", 0.0, lambda: (fired.append("head"), done.set()))
        head.arm("head", 3600, lambda: fired.append("late"), keep=True)  # trickled bytes: no extension
        await done.wait()
        return fired, head.phase

    # The phase stays until the state changes (connection.py reads it after the deadline ran out).
    assert asyncio.run(run()) == (["head"], "head")


def test_a_failing_callback_is_reported_and_the_others_still_run_out() -> None:
    async def run() -> tuple[list[str], list[str]]:
        loop = asyncio.get_running_loop()
        reported: list[str] = []
        loop.set_exception_handler(lambda _loop, context: reported.append(context["message"]))
        fired: list[str] = []
        fine_done, later_done = asyncio.Event(), asyncio.Event()

        def fail() -> None:
            raise RuntimeError("boom")

        broken, fine = Deadline(loop), Deadline(loop)
        broken.arm("idle", 0.0, fail)
        fine.arm("idle", 0.0, lambda: (fired.append("fine"), fine_done.set()))
        await fine_done.wait()
        later = Deadline(loop)  # the wheel still runs after the failure
        later.arm("idle", 0.0, lambda: (fired.append("later"), later_done.set()))
        await later_done.wait()
        return fired, reported

    assert asyncio.run(run()) == (["fine", "later"], ["connection deadline failed"])
