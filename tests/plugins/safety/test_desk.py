"""`SafetyDesk` on every engine: the operator's rules whatever the path (MCP-AQL §8.7.3, §8.8)."""

from __future__ import annotations

import anyio
import pytest

from aql_mcp.builtin_sections import SafetySettings
from aql_mcp.operations.results import (
    NOT_FOUND_RESOURCE,
    PERMISSION_DENIED,
    RATE_LIMIT_EXCEEDED,
    TOKEN_ALREADY_USED,
    TOKEN_EXPIRED,
    TOKEN_INVALID,
    OperationError,
)
from aql_mcp.plugins.safety.desk import SafetyDesk
from aql_mcp.plugins.safety.store import AgentRun, Approval, Challenge
from aql_mcp.settings import Settings
from aql_mcp.store.base import Store
from aql_mcp.store.principals import Identity
from tests.support.clock import Clock

pytestmark = pytest.mark.anyio
AGENT = "p-agent"
OPERATOR = "p-operator"


def _desk(store: Store, clock: Clock, **safety: object) -> SafetyDesk:
    return SafetyDesk(store.safety, Settings(safety=SafetySettings(**safety)), clock=clock)  # type: ignore[arg-type]


async def _blocked(store: Store, desk: SafetyDesk, clock: Clock, tier: str = "deny") -> Challenge:
    run = AgentRun("r1", "builder", AGENT, None, "running", 0, clock.now, clock.now)
    await store.safety.start_run(run)
    await store.safety.set_run_status("r1", "blocked", clock.now)
    return await desk.verification.raise_for(run, tier, "drop_table users", "deny pattern", clock.now)  # type: ignore[arg-type]


async def _refused(code: str, call: object) -> OperationError:
    with pytest.raises(OperationError) as caught:
        await call  # type: ignore[misc]
    assert caught.value.code == code
    return caught.value


async def test_the_right_code_from_another_principal_lifts_the_block_once(store: Store) -> None:
    clock = Clock()
    desk = _desk(store, clock)
    challenge = await _blocked(store, desk, clock)
    await desk.verify(challenge.id, challenge.code, OPERATOR)
    assert await store.safety.get_block(AGENT) is None
    await _refused(TOKEN_ALREADY_USED, desk.verify(challenge.id, challenge.code, OPERATOR))
    kinds = [event.kind for event in (await desk.overview()).events]
    assert kinds[:2] == ["verified", "challenge_raised"]


async def test_the_agents_own_principal_cannot_verify_approve_or_lift_8_7_3(store: Store) -> None:
    clock = Clock()
    desk = _desk(store, clock)
    challenge = await _blocked(store, desk, clock)
    refused = await _refused(PERMISSION_DENIED, desk.verify(challenge.id, challenge.code, AGENT))
    assert refused.details == {"reason": "self_approval"}
    await _refused(PERMISSION_DENIED, desk.reject(challenge.id, AGENT))
    await _refused(PERMISSION_DENIED, desk.lift(AGENT, AGENT))
    approval = Approval("a1", "builder", "r1", AGENT, "autonomy_pause", "delete_user", "why", "pending", clock.now)
    await store.safety.open_approval(approval)
    await _refused(PERMISSION_DENIED, desk.approve("a1", AGENT))
    assert await store.safety.get_block(AGENT) is not None
    assert (await store.safety.get_approval("a1")).status == "pending"  # type: ignore[union-attr]


async def test_a_wrong_code_is_counted_and_replaced_by_a_new_challenge_8_8_2(store: Store) -> None:
    clock = Clock()
    desk = _desk(store, clock)
    challenge = await _blocked(store, desk, clock)
    refused = await _refused(TOKEN_INVALID, desk.verify(challenge.id, "not-the-code", OPERATOR))
    assert refused.details is not None
    assert refused.details["failures"] == 1
    fresh_id = refused.details["verificationId"]
    assert fresh_id != challenge.id
    assert "not-the-code" not in str(refused.details)
    await _refused(TOKEN_ALREADY_USED, desk.verify(challenge.id, challenge.code, OPERATOR))
    fresh = await store.safety.get_challenge(fresh_id)
    assert fresh is not None
    assert fresh.code != challenge.code
    block = await store.safety.get_block(AGENT)
    assert block is not None
    assert block.challenge_id == fresh_id
    await desk.verify(fresh_id, fresh.code, OPERATOR)
    assert await store.safety.get_block(AGENT) is None


async def test_an_expired_challenge_counts_as_failed_and_the_block_stays_8_8_2(store: Store) -> None:
    clock = Clock()
    desk = _desk(store, clock, challenge_ttl_seconds=60)
    challenge = await _blocked(store, desk, clock)
    clock.now += 61
    refused = await _refused(TOKEN_EXPIRED, desk.verify(challenge.id, challenge.code, OPERATOR))
    assert await store.safety.failures(AGENT, clock.now - 60) == 1
    block = await store.safety.get_block(AGENT)
    assert block is not None
    assert refused.details == {"verificationId": block.challenge_id}


async def test_failures_beyond_the_limit_within_the_window_are_refused_8_8_5(store: Store) -> None:
    clock = Clock()
    desk = _desk(store, clock, max_failed_verifications=2, failure_window_seconds=60)
    challenge = await _blocked(store, desk, clock)
    for _ in range(2):
        refused = await _refused(TOKEN_INVALID, desk.verify(challenge.id, "wrong", OPERATOR))
        challenge = await store.safety.get_challenge(refused.details["verificationId"])  # type: ignore[index,assignment]
    await _refused(RATE_LIMIT_EXCEEDED, desk.verify(challenge.id, challenge.code, OPERATOR))
    clock.now += 61
    await desk.verify(challenge.id, challenge.code, OPERATOR)
    assert await store.safety.get_block(AGENT) is None


async def test_a_rejected_challenge_keeps_the_block_and_approvals_are_decided_once(store: Store) -> None:
    clock = Clock()
    desk = _desk(store, clock)
    challenge = await _blocked(store, desk, clock)
    await desk.reject(challenge.id, OPERATOR)
    assert await store.safety.get_block(AGENT) is not None
    await _refused(NOT_FOUND_RESOURCE, desk.verify("no-such-id", "x", OPERATOR))
    approval = Approval("a1", "builder", "r1", AGENT, "autonomy_pause", "delete_user", "why", "pending", clock.now)
    await store.safety.open_approval(approval)
    await desk.deny("a1", OPERATOR)
    await _refused(TOKEN_ALREADY_USED, desk.approve("a1", OPERATOR))
    notices = await store.safety.take_notices(AGENT, clock.now)
    assert "status" in [notice.type for notice in notices]
    await desk.lift(AGENT, OPERATOR)
    assert await store.safety.get_block(AGENT) is None


async def test_no_event_or_overview_detail_ever_carries_a_code_8_8_4(store: Store) -> None:
    clock = Clock()
    desk = _desk(store, clock)
    challenge = await _blocked(store, desk, clock)
    await _refused(TOKEN_INVALID, desk.verify(challenge.id, "wrong", OPERATOR))
    view = await desk.overview()
    for event in view.events:
        assert challenge.code not in str(event.detail)
    notices = await store.safety.take_notices(AGENT, clock.now)
    assert all(challenge.code not in str(notice.metadata) for notice in notices)


async def test_the_overview_always_offers_an_answerable_challenge_for_a_block(store: Store) -> None:
    clock = Clock()
    desk = _desk(store, clock, challenge_ttl_seconds=60)
    challenge = await _blocked(store, desk, clock)
    await desk.reject(challenge.id, OPERATOR)
    view = await desk.overview()
    assert [b.principal for b in view.blocks] == [AGENT]
    assert [c.id for c in view.challenges] == [view.blocks[0].challenge_id]
    assert view.challenges[0].id != challenge.id
    clock.now += 61
    later = await desk.overview()
    assert later.challenges[0].id not in (challenge.id, view.challenges[0].id)
    await desk.verify(later.challenges[0].id, later.challenges[0].code, OPERATOR)
    assert (await desk.overview()).blocks == []


async def test_concurrent_wrong_guesses_are_compared_no_more_often_than_the_limit_allows_8_8_5(store: Store) -> None:
    clock = Clock()
    desk = _desk(store, clock, max_failed_verifications=3, failure_window_seconds=60)
    challenge = await _blocked(store, desk, clock)
    codes: list[str] = []

    async def guess(i: int) -> None:
        try:
            await desk.verify(challenge.id, f"wrong{i}", OPERATOR)
        except OperationError as exc:
            codes.append(exc.code)

    async with anyio.create_task_group() as group:
        for i in range(20):
            group.start_soon(guess, i)
    # Guesses that read the challenge after the first wrong one failed it are refused as used.
    assert await store.safety.failures(AGENT, clock.now - 60) <= 3
    assert codes.count(TOKEN_INVALID) <= 3
    assert len(codes) == 20
    assert set(codes) <= {TOKEN_INVALID, RATE_LIMIT_EXCEEDED, TOKEN_ALREADY_USED}


async def test_two_replicas_renewing_an_expired_block_challenge_leave_one_pending_challenge(store: Store) -> None:
    clock = Clock()
    first, second = _desk(store, clock, challenge_ttl_seconds=60), _desk(store, clock, challenge_ttl_seconds=60)
    challenge = await _blocked(store, first, clock)
    clock.now += 61
    views = []

    async def look(desk: SafetyDesk) -> None:
        views.append(await desk.overview())

    async with anyio.create_task_group() as group:
        group.start_soon(look, first)
        group.start_soon(look, second)
    block = await store.safety.get_block(AGENT)
    assert block is not None
    pending = (await first.overview()).challenges
    assert [c.id for c in pending] == [block.challenge_id]
    assert block.challenge_id != challenge.id


async def test_the_overview_names_the_principal_of_each_row_where_it_is_known(store: Store) -> None:
    """issue 27, N8: the console tells two agents of one name apart by their principal."""
    clock = Clock()
    desk = SafetyDesk(store.safety, Settings(), clock=clock, principals=store.principals)
    await store.principals.remember(Identity(AGENT, "alice", "acme"), clock.now)
    await _blocked(store, desk, clock)
    view = await desk.overview()
    assert view.challenges[0].principal == AGENT
    assert view.identities == {AGENT: Identity(AGENT, "alice", "acme")}


async def test_a_desk_without_the_directory_names_no_one(store: Store) -> None:
    clock = Clock()
    desk = _desk(store, clock)
    await store.principals.remember(Identity(AGENT, "alice"), clock.now)
    await _blocked(store, desk, clock)
    assert (await desk.overview()).identities == {}
