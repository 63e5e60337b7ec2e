"""The `SafetyStore` contract on every engine (MCP-AQL §8.6-8.8, docs/safety.md): runs, challenges
decided once, blocks per principal, approvals decided once, pull-based notices, the failure window."""

from __future__ import annotations

import anyio
import pytest

from aql_mcp.plugins.safety.store import BROADCAST, AgentRun, Approval, Block, Challenge
from aql_mcp.store.base import Store
from tests.support.engines import Backend

pytestmark = pytest.mark.anyio
NOW = 1_000_000.0


def _run(run_id: str = "r1", principal: str = "p-agent") -> AgentRun:
    return AgentRun(
        id=run_id,
        agent="builder",
        principal=principal,
        session="s1",
        status="running",
        steps=0,
        started_at=NOW,
        updated_at=NOW,
        settings={"maxAutonomousSteps": 5},
    )


def _challenge(challenge_id: str = "c1", *, tier: str = "deny", ttl: float = 300.0) -> Challenge:
    return Challenge(
        id=challenge_id,
        agent="builder",
        run_id="r1",
        principal="p-agent",
        tier=tier,  # type: ignore[arg-type]
        action="drop_table users",
        reason="deny pattern drop_*",
        code="the-code",
        status="pending",
        created_at=NOW,
        expires_at=NOW + ttl,
    )


def _approval(approval_id: str = "a1", *, token_hash: str | None = None) -> Approval:
    return Approval(
        id=approval_id,
        agent="builder",
        run_id="r1",
        principal="p-agent",
        kind="autonomy_pause" if token_hash is None else "permission_pending",
        action="delete_user 7",
        reason="requires approval",
        status="pending",
        created_at=NOW,
        token_hash=token_hash,
    )


async def test_a_run_counts_its_steps_while_live_and_stays_ended_once_completed(store: Store) -> None:
    safety = store.safety
    await safety.start_run(_run())
    counted = await safety.count_step("r1", "read_file a", NOW + 1)
    assert counted is not None
    assert (counted.steps, counted.last_action, counted.settings) == (1, "read_file a", {"maxAutonomousSteps": 5})
    assert [run.id for run in await safety.live_runs("p-agent")] == ["r1"]
    assert await safety.live_runs("p-other") == []
    assert await safety.set_run_status("r1", "completed", NOW + 2)
    assert not await safety.set_run_status("r1", "running", NOW + 3)
    assert await safety.count_step("r1", "read_file b", NOW + 3) is None
    assert await safety.reset_steps("r1", NOW + 3)
    assert (await safety.get_run("r1")).steps == 0  # type: ignore[union-attr]
    ended = await safety.get_run("r1")
    assert ended is not None
    assert (ended.status, ended.ended_at) == ("completed", NOW + 2)
    assert await safety.live_runs("p-agent") == []


async def test_a_hard_block_is_kept_per_principal_and_lifted_only_by_passing_its_challenge(store: Store) -> None:
    safety = store.safety
    await safety.start_run(_run())
    await safety.set_run_status("r1", "blocked", NOW)
    await safety.open_challenge(_challenge(), block=Block("builder", "c1", "deny", NOW, "p-agent"))
    block = await safety.get_block("p-agent")
    assert block is not None
    assert (block.challenge_id, block.agent) == ("c1", "builder")
    assert await safety.get_block("p-other") is None
    passed = await safety.pass_challenge("c1", "p-operator", NOW + 1)
    assert passed is not None
    assert passed.code == "the-code"
    assert await safety.get_block("p-agent") is None
    assert await safety.pass_challenge("c1", "p-operator", NOW + 2) is None
    decided = await safety.get_challenge("c1")
    assert decided is not None
    assert (decided.status, decided.decided_by) == ("verified", "p-operator")
    run = await safety.get_run("r1")
    assert run is not None
    assert run.status == "running"


async def test_a_challenge_past_its_expiry_cannot_be_passed_and_a_failed_one_hands_the_block_on(store: Store) -> None:
    safety = store.safety
    await safety.open_challenge(_challenge(ttl=10), block=Block("builder", "c1", "deny", NOW, "p-agent"))
    assert await safety.pass_challenge("c1", "p-operator", NOW + 11) is None
    assert await safety.fail_challenge("c1", "p-operator", NOW + 11, replacement=_challenge("c2"))
    assert not await safety.fail_challenge("c1", "p-operator", NOW + 12)
    expired = await safety.get_challenge("c1")
    assert expired is not None
    assert expired.status == "expired"
    block = await safety.get_block("p-agent")
    assert block is not None
    assert block.challenge_id == "c2"
    pending = await safety.pending_challenge("p-agent", NOW + 12)
    assert pending is not None
    assert pending.id == "c2"


async def test_expiry_lifts_a_verify_pause_but_keeps_a_hard_block(store: Store) -> None:
    safety = store.safety
    await safety.start_run(_run())
    await safety.set_run_status("r1", "paused", NOW)
    await safety.open_challenge(_challenge("v1", tier="verify", ttl=10))
    await safety.open_challenge(_challenge("d1", ttl=10), block=Block("builder", "d1", "deny", NOW, "p-agent"))
    await safety.add_notice("p-agent", "autonomy_pause", "paused", {"verificationId": "v1"}, NOW, ref="v1")
    expired = await safety.expire_challenges(NOW + 11)
    assert sorted(c.id for c in expired) == ["d1", "v1"]
    assert await safety.expire_challenges(NOW + 12) == []
    assert await safety.get_block("p-agent") is not None
    assert await safety.take_notices("p-agent", NOW + 12) == []
    run = await safety.get_run("r1")
    assert run is not None
    assert run.status == "running"


async def test_failures_are_counted_per_principal_within_a_sliding_window(store: Store) -> None:
    safety = store.safety
    assert await safety.note_failure("p-agent", NOW, 60) == 1
    assert await safety.note_failure("p-agent", NOW + 30, 60) == 2
    assert await safety.note_failure("p-other", NOW + 30, 60) == 1
    assert await safety.failures("p-agent", NOW + 30 - 60) == 2
    assert await safety.note_failure("p-agent", NOW + 70, 60) == 2
    assert await safety.failures("p-agent", NOW + 100 - 60) == 1


async def test_an_approval_is_decided_once_and_used_once(store: Store) -> None:
    safety = store.safety
    await safety.start_run(_run())
    await safety.set_run_status("r1", "paused", NOW)
    await safety.open_approval(_approval())
    await safety.add_notice("p-agent", "autonomy_pause", "paused", {}, NOW, ref="a1")
    found = await safety.find_approval("p-agent", "delete_user 7", "autonomy_pause")
    assert found is not None
    assert found.status == "pending"
    decided = await safety.decide_approval("a1", "approved", "p-operator", NOW + 1)
    assert decided is not None
    assert decided.decided_by == "p-operator"
    assert await safety.decide_approval("a1", "denied", "p-operator", NOW + 2) is None
    assert await safety.take_notices("p-agent", NOW + 2) == []
    assert await safety.use_approval("a1", NOW + 3)
    assert not await safety.use_approval("a1", NOW + 4)
    assert await safety.find_approval("p-agent", "delete_user 7", "autonomy_pause") is None
    run = await safety.get_run("r1")
    assert run is not None
    assert run.status == "running"


async def test_a_gatekeeper_approval_is_found_by_its_token_hash_and_shows_its_decision(store: Store) -> None:
    safety = store.safety
    await safety.open_approval(_approval("g1", token_hash="h" * 64))
    found = await safety.approval_by_token("h" * 64)
    assert found is not None
    assert (found.id, found.status) == ("g1", "pending")
    assert [a.id for a in await safety.pending_approvals("p-agent")] == ["g1"]
    assert await safety.decide_approval("g1", "approved", "p-operator", NOW)
    assert await safety.pending_approvals("p-agent") == []
    decided = await safety.approval_by_token("h" * 64)
    assert decided is not None
    assert decided.status == "approved"
    assert await safety.approval_by_token("x" * 64) is None


async def test_notices_reach_their_principal_and_broadcasts_reach_everyone_until_cleared(store: Store) -> None:
    safety = store.safety
    await safety.add_notice("p-agent", "status", "hello", {}, NOW)
    await safety.add_notice(BROADCAST, "danger_zone", "blocked", {"verificationId": "c1"}, NOW, ref="c1")
    first = await safety.take_notices("p-agent", NOW + 1)
    assert [(n.type, n.metadata) for n in first] == [("status", {}), ("danger_zone", {"verificationId": "c1"})]
    again = await safety.take_notices("p-agent", NOW + 2)
    assert [n.type for n in again] == ["danger_zone"]
    assert [n.type for n in await safety.take_notices("p-other", NOW + 2)] == ["danger_zone"]
    assert await safety.clear_notices("c1", NOW + 3) == 1
    assert await safety.take_notices("p-other", NOW + 4) == []


async def test_the_overview_lists_live_runs_pending_items_blocks_and_newest_events_first(store: Store) -> None:
    safety = store.safety
    await safety.start_run(_run())
    await safety.start_run(_run("r2"))
    await safety.set_run_status("r2", "aborted", NOW)
    await safety.open_challenge(_challenge(), block=Block("builder", "c1", "deny", NOW, "p-agent"))
    await safety.open_challenge(_challenge("old", ttl=1))
    await safety.open_approval(_approval())
    for kind in ("first", "second", "third"):
        await safety.add_event("builder", kind, "p-agent", {"n": kind}, NOW)
    view = await safety.overview(NOW + 5, recent=2)
    assert [run.id for run in view.runs] == ["r1"]
    assert [c.id for c in view.challenges] == ["c1"]
    assert view.challenges[0].code == "the-code"
    assert [a.id for a in view.approvals] == ["a1"]
    assert [b.principal for b in view.blocks] == ["p-agent"]
    assert [e.kind for e in view.events] == ["third", "second"]
    assert view.events[0].detail == {"n": "third"}


async def test_two_replicas_racing_to_pass_one_challenge_cannot_both_win(backend: Backend) -> None:
    first, second = await backend.open(), await backend.open()
    await first.safety.open_challenge(_challenge(), block=Block("builder", "c1", "deny", NOW, "p-agent"))
    results: list[object] = []

    async def answer(store: Store) -> None:
        results.append(await store.safety.pass_challenge("c1", "p-operator", NOW + 1))

    async with anyio.create_task_group() as group:
        group.start_soon(answer, first)
        group.start_soon(answer, second)
    assert sum(result is not None for result in results) == 1


async def test_a_block_outlives_the_store_that_set_it(backend: Backend) -> None:
    store = await backend.open()
    await store.safety.open_challenge(_challenge(), block=Block("builder", "c1", "deny", NOW, "p-agent"))
    await store.close()
    backend.opened.remove(store)
    reopened = await backend.open()
    block = await reopened.safety.get_block("p-agent")
    assert block is not None
    assert block.challenge_id == "c1"


async def test_an_operator_override_lifts_the_block_and_fails_its_challenge(store: Store) -> None:
    safety = store.safety
    await safety.open_challenge(_challenge(), block=Block("builder", "c1", "deny", NOW, "p-agent"))
    lifted = await safety.lift_block("p-agent", "p-operator", NOW + 1)
    assert lifted is not None
    assert await safety.get_block("p-agent") is None
    assert await safety.lift_block("p-agent", "p-operator", NOW + 2) is None
    failed = await safety.get_challenge("c1")
    assert failed is not None
    assert failed.status == "failed"


async def test_an_attempt_is_claimed_against_the_limit_in_one_transaction_8_8_5(store: Store) -> None:
    safety = store.safety
    claimed: list[int | None] = []

    async def attempt() -> None:
        claimed.append(await safety.claim_attempt("p-agent", NOW, 60, 3))

    async with anyio.create_task_group() as group:
        for _ in range(20):
            group.start_soon(attempt)
    assert sorted(n for n in claimed if n is not None) == [1, 2, 3]
    assert claimed.count(None) == 17
    await safety.forgive_attempt("p-agent", NOW)
    assert await safety.failures("p-agent", NOW - 60) == 2
    assert await safety.claim_attempt("p-agent", NOW + 61, 60, 3) == 1


async def test_a_block_is_renewed_once_when_two_replicas_race(store: Store) -> None:
    safety = store.safety
    await safety.open_challenge(_challenge("c1"), block=Block("builder", "c1", "deny", NOW, "p-agent"))
    won: list[bool] = []

    async def renew(fresh_id: str) -> None:
        won.append(await safety.renew_block("c1", _challenge(fresh_id)))

    async with anyio.create_task_group() as group:
        group.start_soon(renew, "c2")
        group.start_soon(renew, "c3")
    block = await safety.get_block("p-agent")
    assert sorted(won) == [False, True]
    assert block is not None
    assert block.challenge_id in ("c2", "c3")
    loser = "c3" if block.challenge_id == "c2" else "c2"
    assert await safety.get_challenge(loser) is None


async def test_a_renewal_or_a_run_blocked_after_a_lift_does_not_undo_it_8_8_3(store: Store) -> None:
    """MCP-AQL §8.8.3: a lift committed between a replica's read of the block and its renewal (or
    its marking the run blocked) stands; the later writes are conditional on the block."""
    safety = store.safety
    await safety.start_run(_run())
    await safety.open_challenge(_challenge("c1"), block=Block("builder", "c1", "deny", NOW, "p-agent"))
    assert await safety.block_run("r1", "p-agent", "deny pattern", NOW) is True
    read = await safety.get_block("p-agent")
    assert read is not None
    assert await safety.lift_block("p-agent", "p-operator", NOW + 1) is not None

    assert await safety.renew_block(read.challenge_id, _challenge("c2")) is False
    assert await safety.block_run("r1", "p-agent", "deny pattern", NOW + 2) is False

    assert await safety.get_block("p-agent") is None
    assert await safety.get_challenge("c2") is None
    run = await safety.get_run("r1")
    assert run is not None
    assert run.status == "running"
