"""Agent runs follow the execution lifecycle on every engine (MCP-AQL §8.4.2, §8.4.4; docs/safety.md,
"Agent runs and the execution lifecycle"): every allowed and forbidden change of state, cancellation
from every live state, and what a cancelled run refuses afterwards."""

from __future__ import annotations

import re

import pytest

from aql_mcp.builtin_sections import SafetySettings
from aql_mcp.operations.results import OperationError
from aql_mcp.plugins.safety.loop import ExecutionLoop
from aql_mcp.plugins.safety.store import ENDED_RUNS, LIVE_RUNS, RUN_STATUSES, RUN_TRANSITIONS, AgentRun, RunStatus
from aql_mcp.settings import Settings
from aql_mcp.store.base import Store
from tests.support.clock import Clock

pytestmark = pytest.mark.anyio
NOW = 1_000_000.0
AGENT = "p-agent"
OPERATOR = "p-operator"


def _run(run_id: str, principal: str = AGENT, *, started: float = NOW) -> AgentRun:
    return AgentRun(run_id, "builder", principal, None, "running", 0, started, started)


def _loop(store: Store, **safety: object) -> ExecutionLoop:
    return ExecutionLoop(store.safety, Settings(safety=SafetySettings(**safety)), clock=Clock())  # type: ignore[arg-type]


def test_a_live_run_may_move_to_any_state_and_an_ended_one_to_none() -> None:
    assert set(RUN_STATUSES) == {"running", "paused", "blocked", "completed", "aborted", "cancelled"}
    assert set(LIVE_RUNS) | set(ENDED_RUNS) == set(RUN_STATUSES)
    expected = {(a, b) for a in ("running", "paused", "blocked") for b in RUN_STATUSES}
    assert expected == RUN_TRANSITIONS


async def test_every_transition_between_two_run_states_is_allowed_or_refused_as_declared(store: Store) -> None:
    safety = store.safety
    for source in RUN_STATUSES:
        for target in RUN_STATUSES:
            run_id = f"r-{source}-{target}"
            await safety.start_run(_run(run_id))
            if source != "running":
                assert await safety.set_run_status(run_id, source, NOW + 1)
            moved = await safety.set_run_status(run_id, target, NOW + 2, reason="why")
            assert moved is ((source, target) in RUN_TRANSITIONS), (source, target)
            after = await safety.get_run(run_id)
            assert after is not None
            assert after.status == (target if moved else source), (source, target)
            ended_at = NOW + 2 if moved and target in ENDED_RUNS else NOW + 1 if source in ENDED_RUNS else None
            assert after.ended_at == ended_at, (source, target)


async def test_a_principals_runs_are_listed_newest_first_in_the_states_asked_for(store: Store) -> None:
    safety = store.safety
    for number, status in enumerate(("running", "paused", "cancelled", "completed")):
        await safety.start_run(_run(f"r{number}", started=NOW + number))
        if status != "running":
            await safety.set_run_status(f"r{number}", status, NOW + 10)
    await safety.start_run(_run("other", principal="p-other", started=NOW + 9))
    assert [run.id for run in await safety.list_runs(AGENT, None, 10)] == ["r3", "r2", "r1", "r0"]
    assert [run.id for run in await safety.list_runs(AGENT, None, 2)] == ["r3", "r2"]
    assert [run.id for run in await safety.list_runs(AGENT, ["running", "paused"], 10)] == ["r1", "r0"]
    assert await safety.list_runs(AGENT, [], 10) == []
    assert [run.id for run in await safety.list_runs("p-other", ["running"], 10)] == ["other"]


async def _in_state(loop: ExecutionLoop, state: RunStatus) -> str:
    """A new run of the agent brought to `state` the way the loop brings one there."""
    started = await loop.start(AGENT, None, "builder", {})
    run_id = str(started["execution_id"])
    if state == "paused":
        paused = await loop.step(AGENT, "builder", run_id, "delete_user 7", None)
        assert paused["continue"] is False
    elif state == "blocked":
        stopped = await loop.step(AGENT, "builder", run_id, "drop_table users", None)
        assert stopped["stopped"] is True
    elif state in ("completed", "aborted"):
        await loop.finish(AGENT, "builder", run_id, completed=state == "completed")
    elif state == "cancelled":
        assert await loop.cancel(AGENT, run_id) is not None
    return run_id


@pytest.mark.parametrize("state", ["running", "paused", "blocked"])
async def test_cancel_moves_a_live_run_to_cancelled_and_the_loop_refuses_its_steps_8_4_4(
    store: Store, state: RunStatus
) -> None:
    loop = _loop(store, requires_approval=("delete_*",), deny=("drop_*",))
    run_id = await _in_state(loop, state)
    assert re.fullmatch(r"exec_[0-9a-f]{24}", run_id)
    assert (await store.safety.get_run(run_id)).status == state  # type: ignore[union-attr]
    found = await loop.cancel(AGENT, run_id)
    assert found is not None
    run, cancelled = found
    assert (run.status, cancelled, run.reason) == ("cancelled", True, "cancelled by cancel_execution")
    assert run.ended_at is not None
    with pytest.raises(OperationError) as refused:
        await loop.step(AGENT, "builder", run_id, "read_file notes", None)
    assert refused.value.code == "NOT_FOUND_RESOURCE"
    assert await store.safety.count_step(run_id, "read_file notes", loop.now()) is None
    assert run_id not in [live.id for live in await store.safety.live_runs(AGENT)]
    again = await loop.cancel(AGENT, run_id)
    assert again is not None
    assert (again[0].status, again[1]) == ("cancelled", False)


async def test_cancelling_a_blocked_run_keeps_the_agents_hard_block_8_8_3(store: Store) -> None:
    loop = _loop(store, deny=("drop_*",))
    run_id = await _in_state(loop, "blocked")
    assert await loop.cancel(AGENT, run_id) is not None
    assert await store.safety.get_block(AGENT) is not None
    with pytest.raises(OperationError) as refused:
        await loop.start(AGENT, None, "builder", {})
    assert refused.value.details["reason"] == "agent_blocked"


async def test_cancelling_a_paused_run_leaves_its_pause_for_the_operator_8_6_4(store: Store) -> None:
    loop = _loop(store, requires_approval=("delete_*",))
    run_id = await _in_state(loop, "paused")
    assert await loop.cancel(AGENT, run_id) is not None
    with pytest.raises(OperationError) as refused:
        await loop.start(AGENT, None, "builder", {})
    assert refused.value.details["reason"] == "agent_paused"


@pytest.mark.parametrize("state", ["completed", "aborted", "cancelled"])
async def test_an_ended_run_is_not_cancelled_and_keeps_its_state_8_4_2(store: Store, state: RunStatus) -> None:
    loop = _loop(store)
    run_id = await _in_state(loop, state)
    found = await loop.cancel(AGENT, run_id)
    assert found is not None
    assert (found[0].status, found[1]) == (state, False)
    for completed in (True, False):
        with pytest.raises(OperationError) as refused:
            await loop.finish(AGENT, "builder", run_id, completed=completed)
        assert refused.value.code == "NOT_FOUND_RESOURCE"


async def test_another_principals_run_and_an_unknown_id_are_not_cancelled(store: Store) -> None:
    loop = _loop(store)
    run_id = await _in_state(loop, "running")
    assert await loop.cancel("p-other", run_id) is None
    assert await loop.cancel(AGENT, "exec_" + "0" * 24) is None
    assert (await store.safety.get_run(run_id)).status == "running"  # type: ignore[union-attr]


async def test_a_run_with_an_id_of_an_older_release_still_takes_steps_and_is_cancelled(store: Store) -> None:
    """Release 0.2.0 named runs `exec_` and 32 hex digits: a store it wrote keeps working."""
    loop = _loop(store)
    old = "exec_" + "a" * 32
    await store.safety.start_run(_run(old))
    assert (await loop.step(AGENT, "builder", old, "read_file notes", None))["execution_id"] == old
    found = await loop.cancel(AGENT, old)
    assert found is not None
    assert (found[0].status, found[1]) == ("cancelled", True)
