"""`GateWatch` on every engine: which gatekeeper tokens the safety loop holds for an operator
(MCP-AQL §8.7.3 self-approval; docs/safety.md, "Gatekeeper confirmations during a run")."""

from __future__ import annotations

from typing import Any

import pytest

from aql_mcp.operations.models import Operation
from aql_mcp.operations.results import OperationError
from aql_mcp.plugins.safety.gate import GateWatch
from aql_mcp.plugins.safety.store import AgentRun, Approval, Block, Challenge
from aql_mcp.store.base import Store

pytestmark = pytest.mark.anyio
NOW = 1_000_000.0
AGENT = "p-agent"


async def _noop(params: Any, call: Any) -> None:
    return None


DELETE = Operation("delete_collection", "DELETE", "x", _noop)


def _watch(store: Store) -> GateWatch:
    return GateWatch(store.safety, enforcing=True, clock=lambda: NOW)


def _run(status: str = "running") -> AgentRun:
    return AgentRun("r1", "builder", AGENT, "s1", status, 0, NOW, NOW)  # type: ignore[arg-type]


def _pause() -> Approval:
    return Approval("a1", "builder", "r1", AGENT, "autonomy_pause", "step limit", "paused", "pending", NOW)


async def _refusal(watch: GateWatch, token_hash: str) -> str:
    with pytest.raises(OperationError) as refused:
        await watch.redeeming(DELETE, AGENT, token_hash)
    return str(refused.value.details["reason"])


async def test_a_principal_with_nothing_pending_and_no_live_run_is_not_held(store: Store) -> None:
    watch = _watch(store)
    await store.safety.start_run(_run())
    await store.safety.set_run_status("r1", "completed", NOW)
    await watch.issued(DELETE, AGENT, "h" * 64)
    assert await watch.may_elicit(AGENT) is True
    assert await store.safety.approval_by_token("h" * 64) is None
    await watch.redeeming(DELETE, AGENT, "h" * 64)


async def test_a_pending_pause_holds_tokens_after_the_run_ended_8_6_4(store: Store) -> None:
    watch = _watch(store)
    await store.safety.start_run(_run())
    await store.safety.open_approval(_pause())
    await store.safety.set_run_status("r1", "aborted", NOW)
    await watch.issued(DELETE, AGENT, "h" * 64)
    held = await store.safety.approval_by_token("h" * 64)
    assert await watch.may_elicit(AGENT) is False
    assert held is not None
    assert (held.kind, held.status, held.run_id, held.agent) == ("permission_pending", "pending", "r1", "builder")
    assert await _refusal(watch, "h" * 64) == "awaiting_operator"


async def test_a_token_from_before_the_hold_is_held_when_redeemed_8_7_3(store: Store) -> None:
    watch = _watch(store)
    await watch.issued(DELETE, AGENT, "e" * 64)
    await store.safety.open_approval(_pause())
    assert await _refusal(watch, "e" * 64) == "awaiting_operator"
    assert await store.safety.approval_by_token("e" * 64) is not None


async def test_a_hard_block_holds_tokens_without_a_live_run_8_8_3(store: Store) -> None:
    watch = _watch(store)
    challenge = Challenge("c1", "builder", "r1", AGENT, "deny", "drop_table", "deny", "code", "pending", NOW, NOW + 300)
    await store.safety.open_challenge(challenge, block=Block("builder", "c1", "deny", NOW, AGENT))
    await watch.issued(DELETE, AGENT, "b" * 64)
    held = await store.safety.approval_by_token("b" * 64)
    assert await watch.may_elicit(AGENT) is False
    assert held is not None
    assert held.run_id == "r1"
    assert await _refusal(watch, "b" * 64) == "awaiting_operator"
