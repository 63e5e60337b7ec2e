"""What a human operator can do about the safety loop, wherever they do it (MCP-AQL §8.7.3, §8.8).

The operator console (`/console`) and the safety plugin's `confirm_operation` / `verify_challenge`
(called by another principal holding the operator scope) both go through an `OperatorDesk`, so the
rules are the same on every path: never the blocked agent's own principal (self-approval,
§8.7.3), a challenge used once, expired challenges refused, failed codes counted per agent.
A refusal raises `OperationError` with the MCP-AQL code that says why; every decision is written to
the store's audit trail with the operator who made it.

`operator` is always the deciding principal's key, `Principal.digest` (the console passes its
signed-in operator's digest): comparing it with the agent's key is the self-approval rule. Whether
the operator holds `auth.operator_scope` is checked by the caller (the plugin, the console), which
knows the token; the desk knows only the store.

The refusals (docs/safety.md, "Errors"):
- `NOT_FOUND_RESOURCE`: no such challenge or approval;
- `PERMISSION_DENIED` with `details.reason == "self_approval"`: the agent's own principal;
- `TOKEN_ALREADY_USED`: decided already (verified, failed, approved or denied);
- `TOKEN_EXPIRED`: the challenge expired (counted as a failure; a held agent gets a new one);
- `TOKEN_INVALID`: the wrong code (counted; a held agent gets a new challenge, its id in
  `details.verificationId`);
- `RATE_LIMIT_EXCEEDED`: `safety.max_failed_verifications` failures within the window (§8.8.5).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Protocol

from aql_mcp.plugin import (
    NOT_FOUND_RESOURCE,
    PERMISSION_DENIED,
    RATE_LIMIT_EXCEEDED,
    TOKEN_ALREADY_USED,
    TOKEN_EXPIRED,
    TOKEN_INVALID,
    AuditLog,
    OperationError,
    PrincipalDirectory,
    Settings,
)
from aql_mcp.plugins.safety.journal import Journal
from aql_mcp.plugins.safety.store import Approval, ApprovalStatus, Challenge, SafetyOverview, SafetyStore
from aql_mcp.plugins.safety.verification import Verification, codes_match, holds_agent

SELF_APPROVAL = "self_approval"


class OperatorDesk(Protocol):
    async def overview(self) -> SafetyOverview: ...
    async def approve(self, approval_id: str, operator: str) -> None: ...
    async def deny(self, approval_id: str, operator: str) -> None: ...
    async def verify(self, challenge_id: str, code: str, operator: str) -> None:
        """Check the code; the right one unblocks or resumes the agent, a wrong one is counted."""
        ...

    async def reject(self, challenge_id: str, operator: str) -> None:
        """The operator refuses: the challenge ends `failed` and a hard block stays."""
        ...

    async def lift(self, principal: str, operator: str) -> None:
        """An explicit admin override (§8.8.3): the agent's hard block removed without a code."""
        ...


class SafetyDesk:
    """The `OperatorDesk` over the store: stateless, so every replica builds its own."""

    def __init__(
        self,
        store: SafetyStore,
        settings: Settings,
        *,
        clock: Callable[[], float] = time.time,
        principals: PrincipalDirectory | None = None,
        audit: AuditLog | None = None,
    ) -> None:
        self._store = store
        # Who the principal keys are, for the console's tables; None: the overview names none.
        self._principals = principals
        self._settings = settings.safety
        self._clock = clock
        self.journal = Journal(store, audit)
        self.verification = Verification(store, settings.safety, self.journal)

    async def overview(self) -> SafetyOverview:
        """What the console shows. A block whose challenge expired or was refused gets a fresh one
        here, so the operator always has a code that can lift it (the block itself stays)."""
        now = self._clock()
        await self._store.expire_challenges(now)
        view = await self._store.overview(now)
        answerable = {challenge.id for challenge in view.challenges}
        stale = [block for block in view.blocks if block.challenge_id not in answerable]
        for block in stale:
            await self.verification.renew_block(block, now)
        return await self._identified(await self._store.overview(now) if stale else view)

    async def _identified(self, view: SafetyOverview) -> SafetyOverview:
        """The overview with who each row's principal is: an agent's name is its own choice, so the
        operator tells two agents of the same name apart by their principal (issue 27, N8)."""
        if self._principals is not None:
            view.identities = await self._principals.identities(view.principals())
        return view

    async def approve(self, approval_id: str, operator: str) -> None:
        await self._decide(approval_id, "approved", operator)

    async def deny(self, approval_id: str, operator: str) -> None:
        approval = await self._decide(approval_id, "denied", operator)
        await self._store.add_notice(
            approval.principal,
            "status",
            "An operator denied the paused action; do not take it",
            {"operation": approval.action, "reason": "denied by operator"},
            self._clock(),
        )

    async def verify(self, challenge_id: str, code: str, operator: str) -> None:
        now = self._clock()
        challenge = await self._pending(challenge_id, operator, now)
        window, limit = self._settings.failure_window_seconds, self._settings.max_failed_verifications
        # Counted before the comparison, in one transaction with the check (§8.8.5): of concurrent
        # guesses, only as many as the limit allows are compared at all.
        failures = await self._store.claim_attempt(challenge.principal, now, window, limit)
        if failures is None:
            await self.journal.record(
                challenge.agent, "verification_rate_limited", operator, now, challenge=challenge.id
            )
            raise OperationError(
                RATE_LIMIT_EXCEEDED,
                "Too many failed verifications for this agent; try again later",
                {"retryAfterSeconds": int(window)},
            )
        if challenge.expires_at <= now:
            await self.journal.record(
                challenge.agent, "verification_expired", operator, now, challenge=challenge.id, failures=failures
            )
            if not holds_agent(challenge.tier):
                await self._store.expire_challenges(now)  # a verify pause lifts with its challenge
                raise OperationError(TOKEN_EXPIRED, "The challenge has expired")
            raise OperationError(
                TOKEN_EXPIRED, "The challenge has expired", await self._replacement(challenge, operator, now)
            )
        if not codes_match(code, challenge.code):
            await self.journal.record(
                challenge.agent, "verification_failed", operator, now, challenge=challenge.id, failures=failures
            )
            details = await self._replacement(challenge, operator, now)
            raise OperationError(TOKEN_INVALID, "The verification code is wrong", {**details, "failures": failures})
        await self._store.forgive_attempt(challenge.principal, now)
        if await self._store.pass_challenge(challenge.id, operator, now) is None:
            raise OperationError(TOKEN_ALREADY_USED, "The challenge was answered already")
        await self._grant(challenge, operator, now)
        await self.journal.record(
            challenge.agent, "verified", operator, now, challenge=challenge.id, tier=challenge.tier
        )

    async def reject(self, challenge_id: str, operator: str) -> None:
        now = self._clock()
        challenge = await self._pending(challenge_id, operator, now)
        if not await self._store.fail_challenge(challenge.id, operator, now):
            raise OperationError(TOKEN_ALREADY_USED, "The challenge was answered already")
        await self.journal.record(challenge.agent, "challenge_rejected", operator, now, challenge=challenge.id)

    async def lift(self, principal: str, operator: str) -> None:
        now = self._clock()
        if operator == principal:
            await self._refuse_self(principal, operator, now)
        block = await self._store.lift_block(principal, operator, now)
        if block is None:
            raise OperationError(NOT_FOUND_RESOURCE, "Resource not found: 'no block for this agent'")
        await self.journal.record(block.agent, "block_lifted", operator, now, challenge=block.challenge_id)

    # The rules every path shares

    async def _pending(self, challenge_id: str, operator: str, now: float) -> Challenge:
        challenge = await self._store.get_challenge(challenge_id)
        if challenge is None:
            raise OperationError(NOT_FOUND_RESOURCE, "Resource not found: 'no such challenge'")
        if operator == challenge.principal:
            await self._refuse_self(challenge.agent, operator, now)
        if challenge.status == "expired":
            raise OperationError(TOKEN_EXPIRED, "The challenge has expired")
        if challenge.status != "pending":
            raise OperationError(TOKEN_ALREADY_USED, "The challenge was answered already")
        return challenge

    async def _decide(self, approval_id: str, status: ApprovalStatus, operator: str) -> Approval:
        now = self._clock()
        approval = await self._store.get_approval(approval_id)
        if approval is None:
            raise OperationError(NOT_FOUND_RESOURCE, "Resource not found: 'no such approval'")
        if operator == approval.principal:
            await self._refuse_self(approval.agent, operator, now)
        decided = await self._store.decide_approval(approval_id, status, operator, now)
        if decided is None:
            raise OperationError(TOKEN_ALREADY_USED, "The approval was decided already")
        await self.journal.record(decided.agent, f"approval_{status}", operator, now, approval=approval_id)
        return decided

    async def _grant(self, challenge: Challenge, operator: str, now: float) -> None:
        """A verified code lets the challenged action through once, as an approved pause would:
        otherwise reporting it again would only raise the same challenge (§8.8.1). The grant is an
        approved `autonomy_pause` for (run, action), used by the agent's next report of it."""
        grant = Approval(
            id=str(uuid.uuid4()),
            agent=challenge.agent,
            run_id=challenge.run_id,
            principal=challenge.principal,
            kind="autonomy_pause",
            action=challenge.action,
            reason=f"verified challenge {challenge.id}",
            status="approved",
            created_at=now,
            decided_at=now,
            decided_by=operator,
        )
        await self._store.open_approval(grant)

    async def _refuse_self(self, agent: str, operator: str, now: float) -> None:
        await self.journal.record(agent, "self_approval_refused", operator, now)
        raise OperationError(
            PERMISSION_DENIED,
            "Permission denied: 'the agent that was held back cannot approve itself'",
            {"reason": SELF_APPROVAL},
        )

    async def _replacement(self, challenge: Challenge, operator: str, now: float) -> dict[str, str]:
        fresh = await self.verification.replace(challenge, operator, now)
        return {"verificationId": fresh.id} if fresh.id != challenge.id else {}
