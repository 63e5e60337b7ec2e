"""The built-in `safety` plugin: the MCP-AQL execution safety loop's reserved operations (§8.5.4,
§8.6-8.8; docs/safety.md).

`execute_agent`, `record_execution_step`, `complete_execution` and `abort_execution` are the
agent's; `confirm_operation` and `verify_challenge` are an operator's: the caller must be another
principal than the agent held back (self-approval, §8.7.3) and hold `auth.operator_scope`. Both go
through the same `SafetyDesk` as the operator console.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starlette.routing import BaseRoute

from aql_mcp.plugin import (
    NOT_FOUND_RESOURCE,
    PERMISSION_DENIED,
    TOKEN_ALREADY_USED,
    TOKEN_EXPIRED,
    TOKEN_INVALID,
    TOKEN_PREFIX,
    VALIDATION_MISSING_PARAM,
    VALIDATION_PAYLOAD_TOO_LARGE,
    Call,
    Example,
    Identity,
    Lifecycle,
    Operation,
    OperationError,
    PluginOperations,
    Principal,
    Returns,
    RouteServices,
    Settings,
    Skill,
    Store,
    TrustLevel,
    principal_key,
    tenant_key,
    token_digest,
    trail_log,
)
from aql_mcp.plugins.safety.agent_runs import STATE_TYPE, AgentRunSource
from aql_mcp.plugins.safety.console.banner import console_banner
from aql_mcp.plugins.safety.console.routes import console_routes
from aql_mcp.plugins.safety.gate import GateWatch
from aql_mcp.plugins.safety.loop import ExecutionLoop
from aql_mcp.plugins.safety.params import (
    MAX_PATTERN_CHARACTERS,
    ConfirmOperation,
    ExecuteAgent,
    FinishExecution,
    RecordStep,
    VerifyChallenge,
)
from aql_mcp.plugins.safety.store import RUN_STATUSES, Approval, SafetyStore
from aql_mcp.plugins.safety.tables import TABLES

DIRECTIVE = Returns(
    "AutonomyDirective",
    "object",
    "{continue, factors, stopped?, reason?, stepsRemaining?, nextStepRisk?, notifications}",
)


def caller(call: Call) -> str:
    return principal_key(call.principal)


def identity_of(principal: Principal, tenant_claim: str) -> Identity:
    """Who `principal` is for an operator: its subject, and its records tenant (`records.tenant_claim`)
    when that is another claim than the subject."""
    tenant = tenant_key(principal, tenant_claim) if tenant_claim != "sub" else None
    return Identity(principal.digest, principal.qualified(principal.subject), tenant)


@dataclass
class SafetyOperations:
    settings: Settings
    store: Store
    safety: SafetyStore
    loop: ExecutionLoop

    async def execute_agent(self, params: ExecuteAgent, call: Call) -> dict[str, Any]:
        check_pattern_characters(params)
        # The loop keeps the §8.7.4 element names in the execution's policy (loop.py).
        asked = {
            "maxAutonomousSteps": params.max_autonomous_steps,
            "riskTolerance": params.risk_tolerance,
            "deny": list(params.deny),
            "requiresApproval": list(params.requires_approval),
        }
        if call.principal is not None:
            # Before the run exists, so whatever it raises an operator sees whose agent it is.
            identity = identity_of(call.principal, self.settings.records.tenant_claim)
            await self.store.principals.remember(identity, self.loop.now())
        return await self.loop.start(caller(call), call.session_id, params.element_name, asked)

    async def record_execution_step(self, params: RecordStep, call: Call) -> dict[str, Any]:
        return await self.loop.step(
            caller(call), params.element_name, params.execution_id, params.next_action_hint, params.outcome
        )

    async def complete_execution(self, params: FinishExecution, call: Call) -> dict[str, Any]:
        return await self.loop.finish(caller(call), params.element_name, params.execution_id, completed=True)

    async def abort_execution(self, params: FinishExecution, call: Call) -> dict[str, Any]:
        return await self.loop.finish(caller(call), params.element_name, params.execution_id, completed=False)

    async def confirm_operation(self, params: ConfirmOperation, call: Call) -> dict[str, Any]:
        approval = await self._approval(params)
        operator = caller(call)
        if operator != approval.principal:
            self._require_operator(call)
        await self.loop.desk.approve(approval.id, operator)
        return {"approved": True, "approval_id": approval.id, "operation": approval.action, "kind": approval.kind}

    async def verify_challenge(self, params: VerifyChallenge, call: Call) -> dict[str, Any]:
        challenge = await self.safety.get_challenge(params.challenge_id)
        if challenge is None:
            raise OperationError(NOT_FOUND_RESOURCE, "Resource not found: 'no such challenge'")
        operator = caller(call)
        if operator != challenge.principal:
            self._require_operator(call)
        await self.loop.desk.verify(challenge.id, params.code, operator)
        return {"verified": True, "challenge_id": challenge.id, "element_name": challenge.agent}

    def _require_operator(self, call: Call) -> None:
        scope = self.settings.auth.operator_scope
        if call.principal is None or scope not in call.principal.scopes:
            raise OperationError(
                PERMISSION_DENIED,
                f"Permission denied: requires '{scope}' scope",
                {"reason": "operator_scope_required", "required_scope": scope},
            )

    async def _approval(self, params: ConfirmOperation) -> Approval:
        if params.approval_id is not None:
            found = await self.safety.get_approval(params.approval_id)
            if found is None:
                raise OperationError(NOT_FOUND_RESOURCE, "Resource not found: 'no such approval'")
            return found
        token = params.confirmation_token
        if token is None:
            raise OperationError(
                VALIDATION_MISSING_PARAM,
                "Missing required parameter 'confirmation_token' (or 'approval_id')",
                {"param_name": "confirmation_token"},
            )
        return await self._token_approval(token)

    async def _token_approval(self, token: str) -> Approval:
        """The approval recorded for a live gatekeeper token: an unknown, spent or expired token
        confirms nothing and clears nothing (§8.7.3)."""
        digest = token_digest(token)
        grant = await self.store.confirmations.get_grant(digest)
        approval = await self.safety.approval_by_token(digest)
        if grant is None or approval is None or not token.startswith(TOKEN_PREFIX):
            raise OperationError(TOKEN_INVALID, "Invalid confirmation token")
        if grant.consumed_at is not None or approval.status != "pending":
            raise OperationError(TOKEN_ALREADY_USED, "Confirmation token has already been used")
        if grant.expires_at < self.loop.now():
            raise OperationError(TOKEN_EXPIRED, "Confirmation token has expired")
        return approval


def check_pattern_characters(params: ExecuteAgent) -> None:
    """Every added pattern is matched on every step of the run: their total size is what a step
    costs, so it is bounded (issue 27, N1). The error names the list that went past the bound."""
    denied = sum(map(len, params.deny))
    total = denied + sum(map(len, params.requires_approval))
    if total <= MAX_PATTERN_CHARACTERS:
        return
    name = "deny" if denied > MAX_PATTERN_CHARACTERS else "requires_approval"
    raise OperationError(
        VALIDATION_PAYLOAD_TOO_LARGE,
        f"Parameter '{name}' exceeds the {MAX_PATTERN_CHARACTERS} characters of patterns an execution may add "
        "(deny and requires_approval together)",
        {
            "param_name": name,
            "limit_type": "pattern_characters",
            "limit_value": MAX_PATTERN_CHARACTERS,
            "actual_value": total,
            "unit": "characters",
        },
    )


def catalog(ops: SafetyOperations) -> list[Operation]:
    """The agent's operations (run, then end), then the operator's (introspection keeps this order)."""
    return [*_agent_running(ops), *_agent_ending(ops), *_operator(ops)]


def _agent_running(ops: SafetyOperations) -> list[Operation]:
    s = ops.settings.safety
    defaults = (
        f"Mode {s.mode}; maxAutonomousSteps {s.max_autonomous_steps}; riskTolerance {s.risk_tolerance}; "
        f"deny {list(s.deny)}; requiresApproval {list(s.requires_approval)}; autoApprove {list(s.auto_approve)}."
    )
    return [
        Operation(
            "execute_agent",
            "EXECUTE",
            "Start a monitored execution (the execution safety loop, MCP-AQL §8.6): every action must then be "
            f"reported with record_execution_step before it is taken. Adapter defaults: {defaults} The run is an "
            "execution (kind agent): get_execution, list_executions and cancel_execution take its execution_id; "
            "its states and their core states are the AgentRunState type's.",
            ops.execute_agent,
            ExecuteAgent,
            Returns("Execution", "object", "{execution_id, status, started_at, maxAutonomousSteps, ...}"),
            reserved=True,
            # §8.4.5; the core state of each (§8.4.4) is the AgentRunState type's (the lifecycle object
            # of the spec's introspection schema takes no other field).
            lifecycle=Lifecycle(states=RUN_STATUSES, supports_cancel=True),
            side_effects="Starts an execution; refused while the agent is hard-blocked.",
            parameter_hints={
                "max_autonomous_steps": {"default": s.max_autonomous_steps},
                "risk_tolerance": {"default": s.risk_tolerance},
            },
            examples=(Example({"operation": "execute_agent", "params": {"element_name": "builder"}}),),
        ),
        Operation(
            "record_execution_step",
            "CREATE",
            "Report the next intended action; the answer is an AutonomyDirective: proceed only when continue is "
            "true; stopped means hard-blocked until an operator verifies out of band.",
            ops.record_execution_step,
            RecordStep,
            DIRECTIVE,
            reserved=True,
            side_effects="Counts a step; may pause the execution or hard-block the agent.",
            examples=(
                Example(
                    {
                        "operation": "record_execution_step",
                        "params": {"element_name": "builder", "next_action_hint": "read_file project/config.json"},
                    }
                ),
            ),
        ),
    ]


def _agent_ending(ops: SafetyOperations) -> list[Operation]:
    return [
        Operation(
            "complete_execution",
            "EXECUTE",
            "Signal that the execution finished normally.",
            ops.complete_execution,
            FinishExecution,
            reserved=True,
            side_effects="Ends the execution (completed).",
        ),
        Operation(
            "abort_execution",
            "EXECUTE",
            "Signal that the execution ended abnormally (after a stop directive or a cancellation).",
            ops.abort_execution,
            FinishExecution,
            reserved=True,
            side_effects="Ends the execution (aborted).",
        ),
    ]


def _operator(ops: SafetyOperations) -> list[Operation]:
    s = ops.settings.safety
    return [
        Operation(
            "confirm_operation",
            "EXECUTE",
            "Operator only: approve a paused step (approval_id) or a gatekeeper confirmation given during an "
            f"execution (confirmation_token). Never the held agent's own principal; requires the "
            f"'{ops.settings.auth.operator_scope}' scope.",
            ops.confirm_operation,
            ConfirmOperation,
            reserved=True,
            side_effects="Lets the held agent proceed with that one action.",
        ),
        Operation(
            "verify_challenge",
            "CREATE",
            "Operator only: submit the out-of-band code of a verification challenge (shown in the operator "
            f"console, never to the agent). Codes are single use and expire after {int(s.challenge_ttl_seconds)} s; "
            f"{s.max_failed_verifications} failures per {int(s.failure_window_seconds)} s per agent are allowed.",
            ops.verify_challenge,
            VerifyChallenge,
            reserved=True,
            side_effects="Lifts the agent's pause or hard block.",
        ),
    ]


@dataclass
class SafetyPlugin:
    """The safety loop's operations, and the operator console: its routes and its banner line."""

    name: str = "safety"
    trust: TrustLevel = "community_reviewed"

    def routes(self, settings: Settings, services: RouteServices) -> list[BaseRoute]:
        """The operator console (docs/console.md): its own guard, operator scope required."""
        return console_routes(settings, store=services.store, verifier=services.verifier, issuer=services.dev_issuer)

    def banner(self, settings: Settings, *, terminal: bool) -> str:
        return console_banner(settings, terminal=terminal)

    def register_operations(self, operations: PluginOperations) -> None:
        settings, store = operations.settings, operations.store
        safety = operations.tables(TABLES)
        loop = ExecutionLoop(safety, settings, audit=trail_log(store, settings.audit))
        loop.task_status = operations.task_status  # a run's end reaches the listen streams that asked
        operations.service.router.gatekeeper.watch(GateWatch(safety, enforcing=loop.enforcing))
        operations.service.capabilities["execution_safety_loop"] = settings.safety.mode
        operations.add_type(STATE_TYPE)
        operations.add_execution_source(AgentRunSource(safety, loop))
        for operation in catalog(SafetyOperations(settings, store, safety, loop)):
            operations.add(operation)
        # The plugin's usage guide, served as a skill (docs/discovery.md, "Skills").
        operations.add_skill(Skill.from_package("aql_mcp.plugins.safety", "skill"))


plugin = SafetyPlugin()
