"""The safety loop's watch on the gatekeeper (MCP-AQL §8.7.3 `permission_pending`; the
gatekeeper document §7.3, "Confirmation flow during execution").

When the gatekeeper answers CONFIRMATION_REQUIRED to a principal with a live run, the token (by its
SHA-256, as the gatekeeper stores it) is recorded as a `permission_pending` approval with a notice
for the agent's next directive. The agent holds the token, so redeeming it is refused until
another principal with the operator scope (or the console) approved it with `confirm_operation`:
otherwise the agent would approve itself by retrying (self-approval, §8.7.3). A token issued before
the agent's run started and redeemed during it is held the same way, from the redemption on. A
token issued and redeemed outside any run is the gatekeeper's business alone.

For the same reason a principal with a live run in enforcing mode is never asked by elicitation
(`aql.confirm_with_elicitation`): the client that would answer is the agent's own, so the agent
would confirm its own call. It gets a token instead, held as above.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

from aql_mcp.operations.models import Operation
from aql_mcp.operations.results import PERMISSION_DENIED, OperationError
from aql_mcp.store.safety import AgentRun, Approval, SafetyStore


class GateWatch:
    def __init__(self, store: SafetyStore, *, enforcing: bool, clock: Callable[[], float] = time.time) -> None:
        self._store = store
        self._enforcing = enforcing
        self._clock = clock

    async def may_elicit(self, principal: str) -> bool:
        if not self._enforcing:
            return True
        return not any(run.principal == principal for run in await self._store.live_runs())

    async def issued(self, operation: Operation, principal: str, token_hash: str) -> None:
        if not self._enforcing:
            return
        runs = [run for run in await self._store.live_runs() if run.principal == principal]
        if runs:
            await self._hold(runs[-1], operation, principal, token_hash)

    async def _hold(self, run: AgentRun, operation: Operation, principal: str, token_hash: str) -> Approval:
        now = self._clock()
        reason = f"Operation '{operation.name}' ({operation.danger_level}) requires confirmation"
        approval = Approval(
            id=str(uuid.uuid4()),
            agent=run.agent,
            run_id=run.id,
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
        await self._store.add_event(run.agent, "permission_pending", principal, {"approval": approval.id}, now)
        return approval

    async def redeeming(self, operation: Operation, principal: str, token_hash: str) -> None:
        if not self._enforcing:
            return
        approval = await self._store.approval_by_token(token_hash)
        if approval is None:
            # A token obtained before the run started, redeemed during it: held like one issued
            # during the run, or an agent could stock up on tokens and then start its execution.
            runs = [run for run in await self._store.live_runs() if run.principal == principal]
            if not runs:
                return
            approval = await self._hold(runs[-1], operation, principal, token_hash)
        if approval.status == "approved":
            return
        reason = "awaiting_operator" if approval.status == "pending" else "denied_by_operator"
        raise OperationError(
            PERMISSION_DENIED,
            "Permission denied: 'an operator must confirm this operation first (confirm_operation)'",
            {"reason": reason, "approvalId": approval.id, "operation": operation.name},
        )
