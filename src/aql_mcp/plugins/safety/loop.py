"""The execution safety loop (MCP-AQL §8.6-8.8): runs, reported steps and their directives.

Every agent is keyed by its principal (`Principal.digest`), never by the `element_name` it chose:
a hard block (§8.8.3) holds whatever name or execution the agent starts next. The store is the
truth, so any replica can answer any step of any run (docs/safety.md).

Per mode (`safety.mode`, §8.6.1, §8.6.4):
- `enforcing`: steps are evaluated; pauses wait for a human; blocks hold the agent;
- `monitoring`: steps are evaluated and the verdict reported in `factors`, but `continue` is always
  true and nothing is held;
- `logging` / `disabled`: steps are counted, not evaluated; `continue` is true.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import anyio
import anyio.to_thread

from aql_mcp.builtin_sections import SafetySettings
from aql_mcp.plugin import (
    NOT_FOUND_RESOURCE,
    PERMISSION_DENIED,
    RATE_LIMIT_QUOTA_EXHAUSTED,
    AuditLog,
    OperationError,
    Settings,
    TaskStatusReporter,
    new_execution_id,
)
from aql_mcp.plugins.safety.desk import SafetyDesk
from aql_mcp.plugins.safety.directive import directive, iso
from aql_mcp.plugins.safety.evaluator import Deadline, Policy, Verdict, evaluate
from aql_mcp.plugins.safety.policy import asked_policy, run_policy, stored_settings
from aql_mcp.plugins.safety.store import ENDED_RUNS, AgentRun, Approval, ChallengeTier, RunStatus, SafetyStore

STEP_LIMIT_ACTION = "step limit of execution {}"


class ExecutionLoop:
    def __init__(
        self,
        store: SafetyStore,
        settings: Settings,
        *,
        clock: Callable[[], float] = time.time,
        audit: AuditLog | None = None,
    ) -> None:
        self._store = store
        self._settings: SafetySettings = settings.safety
        self._clock = clock
        self.desk = SafetyDesk(store, settings, clock=clock, audit=audit)
        self._evaluator: anyio.CapacityLimiter | None = None
        # Told when a run's task ends (docs/executions.md, "MCP tasks (2026-07-28)"): only `finish`
        # and `cancel` end a run; a pause or block keeps its task `working`.
        self.task_status: TaskStatusReporter | None = None

    def now(self) -> float:
        return self._clock()

    @property
    def mode(self) -> str:
        return self._settings.mode

    @property
    def enforcing(self) -> bool:
        return self._settings.mode == "enforcing"

    async def start(self, principal: str, session: str | None, agent: str, asked: dict[str, Any]) -> dict[str, Any]:
        """`execute_agent`: a new monitored run, refused while the agent is hard-blocked (§8.8.3)."""
        now = self._clock()
        await self._refuse_if_blocked(principal, now)
        await self._refuse_if_paused(principal, now)
        await self._refuse_past_live_cap(principal)
        policy = asked_policy(asked, self._settings)
        run = AgentRun(
            id=new_execution_id(),
            agent=agent,
            principal=principal,
            session=session,
            status="running",
            steps=0,
            started_at=now,
            updated_at=now,
            settings=stored_settings(policy),
        )
        await self._store.start_run(run)
        await self.desk.journal.record(agent, "execution_started", principal, now, run=run.id)
        return {
            "execution_id": run.id,
            "element_name": agent,
            "status": "running",
            "started_at": iso(now),
            "execution_safety_loop": self.mode,
            "maxAutonomousSteps": policy.max_steps,
            "riskTolerance": policy.tolerance,
            "stepsRemaining": policy.max_steps,
        }

    async def finish(self, principal: str, agent: str, execution_id: str | None, *, completed: bool) -> dict[str, Any]:
        """`complete_execution` / `abort_execution`: the run ends; refused while blocked (§8.8.3)."""
        now = self._clock()
        await self._refuse_if_blocked(principal, now)
        run = await self._run(principal, agent, execution_id)
        status: RunStatus = "completed" if completed else "aborted"
        if not await self._store.set_run_status(run.id, status, now):
            raise _no_run()
        await self.desk.journal.record(run.agent, f"execution_{status}", principal, now, run=run.id, steps=run.steps)
        await self._tell(run.id, principal)
        return {"execution_id": run.id, "element_name": run.agent, "status": status, "steps": run.steps}

    async def cancel(self, principal: str, execution_id: str) -> tuple[AgentRun, bool] | None:
        """`cancel_execution` on one of the principal's runs (§8.4.4: from any live state, a hard
        block included): the run as it is afterwards and whether this call cancelled it (False when
        it had ended); None when the principal has no such run. A hard block, or a pause waiting for
        an operator, is the agent's and outlives the run: cancelling does not lift either."""
        run = await self._store.get_run(execution_id)
        if run is None or run.principal != principal:
            return None
        now = self._clock()
        cancelled = run.status not in ENDED_RUNS and await self._store.set_run_status(
            run.id, "cancelled", now, reason="cancelled by cancel_execution"
        )
        if cancelled:
            await self.desk.journal.record(
                run.agent, "execution_cancelled", principal, now, run=run.id, steps=run.steps, was=run.status
            )
            await self._tell(run.id, principal)
        return (await self._store.get_run(run.id) or run), cancelled

    async def _tell(self, run_id: str, principal: str) -> None:
        if self.task_status is not None:
            await self.task_status.changed(run_id, principal)

    async def step(
        self, principal: str, agent: str, execution_id: str | None, action: str, outcome: str | None
    ) -> dict[str, Any]:
        """`record_execution_step`: the directive for the reported next action (§8.6.4, §8.7)."""
        now = self._clock()
        run = await self._run(principal, agent, execution_id)
        if not self.enforcing:
            return await self._unenforced(run, action, outcome, now)
        await self._store.expire_challenges(now)
        held = await self._held(run, now)
        if held is not None:
            return held
        waiting = await self._approved_or_waiting(run, action, now)
        if waiting is not None:
            return waiting
        counted = await self._store.count_step(run.id, action, now)
        if counted is None:
            raise _no_run()
        verdict = await self._evaluate(run_policy(counted, self._settings), counted.steps, outcome, action)
        await self.desk.journal.record(
            run.agent,
            "step_evaluated",
            principal,
            now,
            run=run.id,
            step=counted.steps,
            decision=verdict.decision,
            stage=verdict.stage,
            tier=verdict.tier,
        )
        return await self._act(counted, verdict, action, now)

    async def _evaluate(self, policy: Policy, steps: int, outcome: str | None, action: str) -> Verdict:
        """The evaluation runs on a worker thread of its own, never on the event loop, so no hint or
        pattern an agent sends can hold up another caller or a probe (issue 27, N1). One thread: the
        work is CPU-bound under the GIL, more threads would only queue for it. The budget starts
        when the thread takes the evaluation, so a queue of other agents' steps does not spend it."""
        if self._evaluator is None:
            self._evaluator = anyio.CapacityLimiter(1)
        budget = self._settings.evaluation_budget_ms / 1000

        def judge() -> Verdict:
            return evaluate(policy, steps=steps, outcome=outcome, action=action, deadline=Deadline.after(budget))

        return await anyio.to_thread.run_sync(judge, limiter=self._evaluator)

    # The stages around the evaluator

    async def _held(self, run: AgentRun, now: float) -> dict[str, Any] | None:
        """A hard block or a pending `verify` challenge answers every step until lifted (§8.8.3)."""
        block = await self._store.get_block(run.principal)
        challenge = await self.desk.verification.renew_block(block, now) if block is not None else None
        # Blocked only if the block still holds as the run is marked: an operator's lift committed
        # since it was read stands (docs/safety.md, "Races").
        if (
            block is not None
            and challenge is not None
            and await self._store.block_run(run.id, run.principal, block.reason, now)
        ):
            reason = f"Agent is hard-blocked ({block.reason}); out-of-band verification {challenge.id} required"
            return directive(
                proceed=False,
                stopped=True,
                reason=reason,
                risk="danger_zone",
                factors=["Hard block: every execution operation is refused until verified (§8.8.3)"],
                notices=await self._store.take_notices(run.principal, now),
                extra={"execution_id": run.id, "verificationId": challenge.id},
            )
        pending = await self._store.pending_challenge(run.principal, now)
        if pending is not None and pending.tier == "verify":
            return directive(
                proceed=False,
                reason=f"Awaiting out-of-band verification {pending.id}",
                risk="verify",
                factors=["A verify-tier challenge is pending for this agent"],
                notices=await self._store.take_notices(run.principal, now),
                extra={"execution_id": run.id, "verificationId": pending.id},
            )
        return None

    async def _approved_or_waiting(self, run: AgentRun, action: str, now: float) -> dict[str, Any] | None:
        """Anything pending for the agent's principal holds every step of every run it has: a
        gatekeeper confirmation (§7.3 of the gatekeeper) or a pause of any of its executions, so
        that starting another execution does not escape a pause or the step limit (§8.6.4). An
        operator's decision on this action (or on this run's step limit), or a verified challenge
        for it, is applied once."""
        pending = await self._store.pending_approvals(run.principal)
        if pending:
            permission = [a for a in pending if a.kind == "permission_pending"]
            return await self._waiting(run, (permission or pending)[0], now)
        limit = await self._store.find_approval(run.principal, STEP_LIMIT_ACTION.format(run.id), "autonomy_pause")
        if limit is not None and limit.status == "approved" and await self._store.use_approval(limit.id, now):
            await self._store.reset_steps(run.id, now)
        approval = await self._store.find_approval(run.principal, action, "autonomy_pause")
        if approval is not None and approval.run_id == run.id and await self._store.use_approval(approval.id, now):
            return await self._decided(run, approval, action, now)
        return None

    async def _waiting(self, run: AgentRun, approval: Approval, now: float) -> dict[str, Any]:
        return directive(
            proceed=False,
            reason=f"Awaiting operator approval {approval.id} ({approval.reason})",
            risk="confirm",
            factors=["Paused for human review: confirm_operation by an operator, or the operator console"],
            notices=await self._store.take_notices(run.principal, now),
            extra={"execution_id": run.id, "approvalId": approval.id},
        )

    async def _decided(self, run: AgentRun, approval: Approval, action: str, now: float) -> dict[str, Any]:
        if approval.status == "denied":
            return directive(
                proceed=False,
                reason="An operator denied this action",
                factors=["Denied by an operator"],
                notices=await self._store.take_notices(run.principal, now),
                extra={"execution_id": run.id},
            )
        counted = await self._store.count_step(run.id, action, now)
        steps = counted.steps if counted else run.steps
        return directive(
            proceed=True,
            factors=[f"Approved by an operator ({approval.decided_by})"],
            steps_remaining=run_policy(run, self._settings).max_steps - steps,
            notices=await self._store.take_notices(run.principal, now),
            extra={"execution_id": run.id},
        )

    async def _act(self, run: AgentRun, verdict: Verdict, action: str, now: float) -> dict[str, Any]:
        remaining = run_policy(run, self._settings).max_steps - run.steps
        extra: dict[str, Any] = {"execution_id": run.id}
        if verdict.decision == "block":
            await self._store.set_run_status(run.id, "blocked", now, reason=verdict.reason)
            tier: ChallengeTier = "deny" if verdict.stage == "patterns" else "danger_zone"
            challenge = await self.desk.verification.raise_for(run, tier, action, verdict.reason or tier, now)
            extra["verificationId"] = challenge.id
        elif verdict.decision == "verify":
            await self._store.set_run_status(run.id, "paused", now, reason=verdict.reason)
            challenge = await self.desk.verification.raise_for(run, "verify", action, verdict.reason or "verify", now)
            extra["verificationId"] = challenge.id
        elif verdict.decision == "pause":
            await self._store.set_run_status(run.id, "paused", now, reason=verdict.reason)
            extra["approvalId"] = await self._pause(run, verdict, action, now)
        elif run.status != "running":
            # e.g. paused on an action an operator denied: the agent moved on to one that passes.
            await self._store.set_run_status(run.id, "running", now)
        return directive(
            proceed=verdict.decision == "continue",
            stopped=verdict.decision == "block",
            reason=verdict.reason,
            factors=verdict.factors,
            steps_remaining=remaining,
            risk=verdict.tier,
            notices=await self._store.take_notices(run.principal, now),
            extra=extra,
        )

    async def _pause(self, run: AgentRun, verdict: Verdict, action: str, now: float) -> str:
        subject = STEP_LIMIT_ACTION.format(run.id) if verdict.stage == "step_limit" else action
        approval = Approval(
            id=str(uuid.uuid4()),
            agent=run.agent,
            run_id=run.id,
            principal=run.principal,
            kind="autonomy_pause",
            action=subject,
            reason=verdict.reason or "paused",
            status="pending",
            created_at=now,
        )
        await self._store.open_approval(approval)
        metadata = {"operation": action, "reason": approval.reason, "approvalId": approval.id}
        await self._store.add_notice(
            run.principal, "autonomy_pause", f"Execution paused: {approval.reason}", metadata, now, ref=approval.id
        )
        return approval.id

    async def _unenforced(self, run: AgentRun, action: str, outcome: str | None, now: float) -> dict[str, Any]:
        counted = await self._store.count_step(run.id, action, now)
        if counted is None:
            raise _no_run()
        policy = run_policy(counted, self._settings)
        if self.mode != "monitoring":
            factors = [f"Safety loop {self.mode}: step recorded, not evaluated"]
            await self.desk.journal.record(run.agent, "step_recorded", run.principal, now, run=run.id)
            return directive(proceed=True, factors=factors, notices=[], extra={"execution_id": run.id})
        verdict = await self._evaluate(policy, counted.steps, outcome, action)
        await self.desk.journal.record(
            run.agent, "step_monitored", run.principal, now, run=run.id, decision=verdict.decision, tier=verdict.tier
        )
        factors = [*verdict.factors, f"Monitoring mode: advisory only (enforcing would {verdict.decision})"]
        return directive(
            proceed=True,
            factors=factors,
            reason=verdict.reason,
            risk=verdict.tier,
            steps_remaining=policy.max_steps - counted.steps,
            notices=await self._store.take_notices(run.principal, now),
            extra={"execution_id": run.id},
        )

    async def _refuse_if_blocked(self, principal: str, now: float) -> None:
        if not self.enforcing:
            return
        block = await self._store.get_block(principal)
        if block is None:
            return
        challenge = await self.desk.verification.renew_block(block, now)
        if challenge is None:
            return  # lifted since it was read
        await self.desk.journal.record(block.agent, "blocked_operation_refused", principal, now, challenge=challenge.id)
        raise OperationError(
            PERMISSION_DENIED,
            "Permission denied: 'the agent is hard-blocked until out-of-band verification'",
            {"reason": "agent_blocked", "verificationId": challenge.id},
        )

    async def _refuse_if_paused(self, principal: str, now: float) -> None:
        """A new execution while one is paused (the step limit, a pattern, a risk above the
        tolerance) would start the count afresh past a human's decision (§8.6.4, §8.7.2 stage 1)."""
        if not self.enforcing:
            return
        pauses = [a for a in await self._store.pending_approvals(principal) if a.kind == "autonomy_pause"]
        if not pauses:
            return
        await self.desk.journal.record(
            pauses[0].agent, "paused_operation_refused", principal, now, approval=pauses[0].id
        )
        raise OperationError(
            PERMISSION_DENIED,
            "Permission denied: 'an execution of this agent is paused until an operator decides'",
            {"reason": "agent_paused", "approvalId": pauses[0].id},
        )

    async def _refuse_past_live_cap(self, principal: str) -> None:
        """Every live run is state the store keeps and the console shows: an agent that never ends
        its runs is stopped at `safety.max_live_runs` instead of growing them without bound."""
        live = len(await self._store.live_runs(principal))
        cap = self._settings.max_live_runs
        if live >= cap:
            raise OperationError(
                RATE_LIMIT_QUOTA_EXHAUSTED,
                f"Quota exhausted: an agent may hold at most {cap} live executions; complete or abort one first",
                {"metric": "live_executions", "current": live, "hard_stop_threshold": cap},
            )

    async def _run(self, principal: str, agent: str, execution_id: str | None) -> AgentRun:
        """The caller's live run: by id, or its newest live run of that element name."""
        if execution_id is not None:
            run = await self._store.get_run(execution_id)
            if run is None or run.principal != principal or run.status in ENDED_RUNS:
                raise _no_run()
            return run
        runs = [r for r in await self._store.live_runs(principal) if r.agent == agent]
        if not runs:
            raise _no_run()
        return runs[-1]


def _no_run() -> OperationError:
    return OperationError(NOT_FOUND_RESOURCE, "Resource not found: 'no live execution of this agent'")
