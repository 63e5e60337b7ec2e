"""`ExecutionLoop` on every engine with a clock of its own: what depends on time (MCP-AQL §8.8.3)."""

from __future__ import annotations

from typing import Any

import pytest

from aql_mcp.builtin_sections import SafetySettings
from aql_mcp.operations.results import OperationError
from aql_mcp.plugins.safety.evaluator import Deadline
from aql_mcp.plugins.safety.loop import ExecutionLoop
from aql_mcp.plugins.safety.store import Block
from aql_mcp.settings import Settings
from aql_mcp.store.base import Store
from tests.support.clock import Clock

pytestmark = pytest.mark.anyio
AGENT = "p-agent"
OPERATOR = "p-operator"


def _loop(store: Store, clock: Clock, **safety: object) -> ExecutionLoop:
    return ExecutionLoop(store.safety, Settings(safety=SafetySettings(**safety)), clock=clock)  # type: ignore[arg-type]


async def test_an_expired_verify_challenge_lifts_the_pause_and_the_same_action_raises_a_new_one_8_8_3(
    store: Store,
) -> None:
    clock = Clock()
    loop = _loop(store, clock, challenge_ttl_seconds=60)
    await loop.start(AGENT, None, "builder", {})
    first = await loop.step(AGENT, "builder", None, "rotate the password", None)
    assert (first["continue"], first["nextStepRisk"]) == (False, "verify")
    clock.now += 61
    again = await loop.step(AGENT, "builder", None, "rotate the password", None)
    assert again["continue"] is False
    assert again["verificationId"] != first["verificationId"]
    assert (await store.safety.get_challenge(first["verificationId"])).status == "expired"  # type: ignore[union-attr]
    clock.now += 61
    other = await loop.step(AGENT, "builder", None, "read_file notes", None)
    assert other["continue"] is True


async def test_an_expired_block_challenge_is_renewed_and_the_block_stays_8_8_3(store: Store) -> None:
    clock = Clock()
    loop = _loop(store, clock, challenge_ttl_seconds=60)
    await loop.start(AGENT, None, "builder", {})
    stopped = await loop.step(AGENT, "builder", None, "drop_table users", None)
    clock.now += 61
    still = await loop.step(AGENT, "builder", None, "read_file notes", None)
    assert (still["stopped"], still["continue"]) == (True, False)
    assert still["verificationId"] != stopped["verificationId"]
    fresh = await store.safety.get_challenge(still["verificationId"])
    assert fresh is not None
    await loop.desk.verify(fresh.id, fresh.code, OPERATOR)
    assert (await loop.step(AGENT, "builder", None, "read_file notes", None))["continue"] is True


async def test_approving_the_step_limit_starts_the_count_again_8_7_2(store: Store) -> None:
    clock = Clock()
    loop = _loop(store, clock, max_autonomous_steps=1)
    await loop.start(AGENT, None, "builder", {})
    assert (await loop.step(AGENT, "builder", None, "read_file a", None))["continue"] is True
    limited = await loop.step(AGENT, "builder", None, "read_file b", None)
    assert limited["reason"] == "Step limit exceeded"
    await loop.desk.approve(limited["approvalId"], OPERATOR)
    assert (await loop.step(AGENT, "builder", None, "read_file b", None))["continue"] is True
    assert (await loop.step(AGENT, "builder", None, "read_file c", None))["continue"] is False


async def test_an_agent_may_tighten_its_policy_but_never_loosen_it_8_7_4(store: Store) -> None:
    loop = _loop(store, Clock(), max_autonomous_steps=10, risk_tolerance="moderate")
    tight = await loop.start(AGENT, None, "a", {"maxAutonomousSteps": 3, "riskTolerance": "conservative"})
    loose = await loop.start("p-other", None, "b", {"maxAutonomousSteps": 99, "riskTolerance": "aggressive"})
    assert (tight["maxAutonomousSteps"], tight["riskTolerance"]) == (3, "conservative")
    assert (loose["maxAutonomousSteps"], loose["riskTolerance"]) == (10, "moderate")
    extra = await loop.start("p-third", None, "c", {"deny": ["curl *"]})
    denied = await loop.step("p-third", "c", extra["execution_id"], "curl http://example.invalid", None)
    assert denied["stopped"] is True


async def test_a_verified_challenge_lets_the_same_action_through_once_8_8_1(store: Store) -> None:
    clock = Clock()
    loop = _loop(store, clock)
    await loop.start(AGENT, None, "builder", {})
    first = await loop.step(AGENT, "builder", None, "rotate the password", None)
    assert first["nextStepRisk"] == "verify"
    challenge = await store.safety.get_challenge(first["verificationId"])
    assert challenge is not None
    await loop.desk.verify(challenge.id, challenge.code, OPERATOR)
    allowed = await loop.step(AGENT, "builder", None, "rotate the password", None)
    afresh = await loop.step(AGENT, "builder", None, "rotate the password", None)
    assert allowed["continue"] is True
    assert (afresh["continue"], afresh["nextStepRisk"]) == (False, "verify")
    assert afresh["verificationId"] != first["verificationId"]


async def test_a_verified_hard_block_lets_the_blocked_action_through_once_8_8_3(store: Store) -> None:
    clock = Clock()
    loop = _loop(store, clock)
    await loop.start(AGENT, None, "builder", {})
    stopped = await loop.step(AGENT, "builder", None, "drop_table users", None)
    challenge = await store.safety.get_challenge(stopped["verificationId"])
    assert challenge is not None
    await loop.desk.verify(challenge.id, challenge.code, OPERATOR)
    allowed = await loop.step(AGENT, "builder", None, "drop_table users", None)
    afresh = await loop.step(AGENT, "builder", None, "drop_table users", None)
    assert allowed["continue"] is True
    assert (afresh["continue"], afresh["stopped"]) == (False, True)


async def test_a_step_limit_pause_holds_the_agent_and_refuses_a_new_execution_8_6_4(store: Store) -> None:
    clock = Clock()
    loop = _loop(store, clock, max_autonomous_steps=2)
    first = await loop.start(AGENT, None, "builder", {})
    for i in range(2):
        assert (await loop.step(AGENT, "builder", None, f"read_file {i}", None))["continue"] is True
    limit = await loop.step(AGENT, "builder", None, "read_file x", None)
    assert (limit["continue"], limit["reason"]) == (False, "Step limit exceeded")
    with pytest.raises(OperationError) as refused:
        await loop.start(AGENT, None, "other-name", {})
    assert (refused.value.code, refused.value.details["reason"]) == ("PERMISSION_DENIED", "agent_paused")
    assert refused.value.details["approvalId"] == limit["approvalId"]
    await loop.desk.approve(limit["approvalId"], OPERATOR)
    assert (await loop.step(AGENT, "builder", first["execution_id"], "read_file y", None))["continue"] is True
    assert (await loop.start(AGENT, None, "other-name", {}))["status"] == "running"


async def test_a_pause_in_one_execution_holds_every_execution_of_the_agent_8_6_4(store: Store) -> None:
    clock = Clock()
    loop = _loop(store, clock, requires_approval=("deploy*",))
    await loop.start(AGENT, None, "builder", {})
    await loop.start(AGENT, None, "helper", {})
    paused = await loop.step(AGENT, "builder", None, "deploy prod", None)
    other = await loop.step(AGENT, "helper", None, "read_file z", None)
    assert paused["continue"] is False
    assert (other["continue"], other["approvalId"]) == (False, paused["approvalId"])
    await loop.desk.deny(paused["approvalId"], OPERATOR)
    assert (await loop.step(AGENT, "helper", None, "read_file z", None))["continue"] is True


async def test_the_danger_zone_broadcast_tells_other_principals_nothing_about_the_blocked_action_8_7_3(
    store: Store,
) -> None:
    clock = Clock()
    loop = _loop(store, clock)
    await loop.start(AGENT, None, "tenant-a-agent", {})
    await loop.start("p-other-tenant", None, "builder", {})
    stopped = await loop.step(AGENT, "tenant-a-agent", None, "drop_table customers_of_acme", None)
    seen = await loop.step("p-other-tenant", "builder", None, "read_file x", None)
    own = await loop.step(AGENT, "tenant-a-agent", None, "read_file x", None)
    [broadcast] = seen["notifications"]
    assert broadcast["type"] == "danger_zone"
    assert broadcast["metadata"] == {"verificationId": stopped["verificationId"]}
    assert "acme" not in str(seen)
    assert "tenant-a-agent" not in str(seen)
    [full] = own["notifications"]
    assert full["metadata"]["operation"] == "drop_table customers_of_acme"
    assert "tenant-a-agent" in full["message"]


async def test_an_agent_past_its_live_executions_is_refused_until_it_ends_one_issue_27(store: Store) -> None:
    loop = _loop(store, Clock(), max_live_runs=2)
    first = await loop.start(AGENT, None, "builder", {})
    await loop.start(AGENT, None, "builder", {})
    with pytest.raises(OperationError) as refused:
        await loop.start(AGENT, None, "other-name", {})
    assert refused.value.code == "RATE_LIMIT_QUOTA_EXHAUSTED"
    assert refused.value.details == {"metric": "live_executions", "current": 2, "hard_stop_threshold": 2}
    assert (await loop.start(OPERATOR, None, "builder", {}))["status"] == "running"
    await loop.finish(AGENT, "builder", first["execution_id"], completed=True)
    assert (await loop.start(AGENT, None, "builder", {}))["status"] == "running"


async def test_a_step_whose_evaluation_runs_past_its_budget_pauses_for_an_operator_issue_27(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The budget is wall time on the evaluation's thread; a deadline already past stands in for a
    slow evaluation, which no test can make slow on purpose without timing it."""
    loop = _loop(store, Clock())
    await loop.start(AGENT, None, "builder", {})
    monkeypatch.setattr(Deadline, "after", classmethod(lambda cls, seconds: cls(0.0)))
    held = await loop.step(AGENT, "builder", None, "read_file notes", None)
    assert (held["continue"], held["reason"]) == (False, "Evaluation budget exceeded")
    assert held["approvalId"]


async def test_a_hard_blocked_agent_may_not_end_its_run_but_a_paused_one_may_8_8_3(store: Store) -> None:
    """§8.8.3: every execution operation of a hard-blocked agent is refused until it is unblocked,
    `complete_execution` and `abort_execution` included; a pause (held, not blocked) lets it stop."""
    clock = Clock()
    loop = _loop(store, clock, requires_approval=("deploy*",))
    await loop.start(AGENT, None, "builder", {})
    paused = await loop.step(AGENT, "builder", None, "deploy prod", None)
    assert (paused["continue"], paused.get("stopped", False)) == (False, False)
    assert (await loop.finish(AGENT, "builder", None, completed=False))["status"] == "aborted"
    await loop.desk.deny(paused["approvalId"], OPERATOR)  # ending the run does not end the hold
    await loop.start(AGENT, None, "builder", {})
    stopped = await loop.step(AGENT, "builder", None, "drop_table users", None)
    assert stopped["stopped"] is True
    for completed in (True, False):
        with pytest.raises(OperationError) as refused:
            await loop.finish(AGENT, "builder", None, completed=completed)
        assert (refused.value.code, refused.value.details["reason"]) == ("PERMISSION_DENIED", "agent_blocked")
        assert refused.value.details["verificationId"] == stopped["verificationId"]
    challenge = await store.safety.get_challenge(stopped["verificationId"])
    assert challenge is not None
    await loop.desk.verify(challenge.id, challenge.code, OPERATOR)
    assert (await loop.finish(AGENT, "builder", None, completed=True))["status"] == "completed"


class LiftedAfterRead:
    """The real safety store, with an operator's lift committed right after the first block is
    read: the interleaving of a step racing a lift, made deterministic without sleeps."""

    def __init__(self, inner: Any, clock: Clock) -> None:
        self._inner = inner
        self._clock = clock
        self.lifted: Block | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def get_block(self, principal: str) -> Block | None:
        block: Block | None = await self._inner.get_block(principal)
        if block is not None and self.lifted is None:
            self.lifted = await self._inner.lift_block(principal, OPERATOR, self._clock.now)
        return block


@pytest.mark.parametrize("expired", [False, True], ids=["pending-challenge", "renewed-challenge"])
async def test_a_lift_committed_after_a_step_read_the_block_is_not_undone_8_8_3(store: Store, expired: bool) -> None:
    """MCP-AQL §8.8.3 (an operator's override lifts a hard block) against a step racing it, on both
    engines: the lift lands between the step's read of the block and its renewal (`expired`: the
    block's challenge had expired, so the step renews it) and marking the run blocked. The lift
    stands: the run stays running, the step goes on, no challenge is renewed for a lifted block."""
    clock = Clock()
    loop = _loop(store, clock, challenge_ttl_seconds=60)
    started = await loop.start(AGENT, None, "builder", {})
    stopped = await loop.step(AGENT, "builder", None, "drop_table users", None)
    assert stopped["stopped"] is True
    if expired:
        clock.now += 61
    racing = LiftedAfterRead(store.safety, clock)
    raced = ExecutionLoop(racing, Settings(safety=SafetySettings(challenge_ttl_seconds=60)), clock=clock)  # type: ignore[arg-type]

    directive = await raced.step(AGENT, "builder", None, "read_file notes", None)

    assert racing.lifted is not None
    assert directive["continue"] is True, directive
    run = await store.safety.get_run(started["execution_id"])
    assert run is not None
    assert run.status == "running"
    assert await store.safety.get_block(AGENT) is None
    assert await store.safety.pending_challenge(AGENT, clock.now) is None


async def test_a_new_execution_racing_a_lift_is_not_refused_8_8_3(store: Store) -> None:
    """MCP-AQL §8.8.3: a lift committed after `execute_agent` read the block lets it start."""
    clock = Clock()
    loop = _loop(store, clock, challenge_ttl_seconds=60)
    await loop.start(AGENT, None, "builder", {})
    await loop.step(AGENT, "builder", None, "drop_table users", None)
    clock.now += 61
    racing = LiftedAfterRead(store.safety, clock)
    raced = ExecutionLoop(racing, Settings(safety=SafetySettings(challenge_ttl_seconds=60)), clock=clock)  # type: ignore[arg-type]

    started = await raced.start(AGENT, None, "builder", {})

    assert racing.lifted is not None
    assert started["execution_id"]
    assert await store.safety.pending_challenge(AGENT, clock.now) is None
