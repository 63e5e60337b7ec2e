"""The safety loop's watch on the gatekeeper (MCP-AQL §8.7.3 `permission_pending`; the
gatekeeper document §7.3, "Confirmation flow during execution").

When the gatekeeper answers CONFIRMATION_REQUIRED to a held principal (below), the token (by its
SHA-256, as the gatekeeper stores it) is recorded as a `permission_pending` approval with a notice
for the agent's next directive. The agent holds the token, so redeeming it is refused until
another principal with the operator scope (or the console) approved it with `confirm_operation`:
otherwise the agent would approve itself by retrying (self-approval, §8.7.3). A token issued before
the principal was held and redeemed while it is, is held the same way, from the redemption on. A
token issued and redeemed while the principal is not held is the gatekeeper's business alone.

For the same reason a held principal is never asked by elicitation (`aql.confirm_with_elicitation`):
the client that would answer is the agent's own, so the agent would confirm its own call. It gets a
token instead, held as above.

A principal is held while it has a live run, and also while anything of it waits for an operator
(a pending `permission_pending` or `autonomy_pause` approval) or it is hard-blocked, run or no run:
otherwise ending the run (`abort_execution`) would let the agent ask again outside any run and
redeem the fresh token itself, leaving the operator's pending decision behind (docs/safety.md).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

from aql_mcp.plugin import PERMISSION_DENIED, Operation, OperationError
from aql_mcp.plugins.safety.store import Approval, SafetyStore


class GateWatch:
    def __init__(self, store: SafetyStore, *, enforcing: bool, clock: Callable[[], float] = time.time) -> None:
        self._store = store
        self._enforcing = enforcing
        self._clock = clock

    async def may_elicit(self, principal: str) -> bool:
        if not self._enforcing:
            return True
        return await self._anchor(principal) is None

    async def issued(self, operation: Operation, principal: str, token_hash: str) -> None:
        if not self._enforcing:
            return
        anchor = await self._anchor(principal)
        if anchor is not None:
            await self._hold(anchor, operation, principal, token_hash)

    async def _anchor(self, principal: str) -> tuple[str, str] | None:
        """(agent, run id) a held token of the principal is recorded against, or None when the
        principal is not held: its newest live run, else what it waits for (a pending approval, a
        block), so that the console shows the token next to the decision it waits behind."""
        runs = await self._store.live_runs(principal)
        if runs:
            return runs[-1].agent, runs[-1].id
        pending = await self._store.pending_approvals(principal)
        if pending:
            return pending[-1].agent, pending[-1].run_id
        block = await self._store.get_block(principal)
        if block is not None:
            challenge = await self._store.get_challenge(block.challenge_id)
            return block.agent, challenge.run_id if challenge is not None else ""
        return None

    async def _hold(self, anchor: tuple[str, str], operation: Operation, principal: str, token_hash: str) -> Approval:
        agent, run_id = anchor
        now = self._clock()
        reason = f"Operation '{operation.name}' ({operation.danger_level}) requires confirmation"
        approval = Approval(
            id=str(uuid.uuid4()),
            agent=agent,
            run_id=run_id,
            principal=principal,
            kind="permission_pending",
            action=operation.name,
            reason=reason,
            status="pending",
            created_at=now,
            token_hash=token_hash,
        )
        await self._store.open_approval(approval)
        metadata = {
            "operation": operation.name,
            "reason": reason,
            "level": operation.danger_level,
            "approvalId": approval.id,
        }
        await self._store.add_notice(principal, "permission_pending", reason, metadata, now, ref=approval.id)
        await self._store.add_event(agent, "permission_pending", principal, {"approval": approval.id}, now)
        return approval

    async def redeeming(self, operation: Operation, principal: str, token_hash: str) -> None:
        if not self._enforcing:
            return
        approval = await self._store.approval_by_token(token_hash)
        if approval is None:
            # A token obtained before the principal was held, redeemed while it is: held like one
            # issued now, or an agent could stock up on tokens and then start its execution.
            anchor = await self._anchor(principal)
            if anchor is None:
                return
            approval = await self._hold(anchor, operation, principal, token_hash)
        if approval.status == "approved":
            return
        reason = "awaiting_operator" if approval.status == "pending" else "denied_by_operator"
        raise OperationError(
            PERMISSION_DENIED,
            "Permission denied: 'an operator must confirm this operation first (confirm_operation)'",
            {"reason": reason, "approvalId": approval.id, "operation": operation.name},
        )
