"""Parameter models of the `safety` plugin: the spec's parameters (MCP-AQL §8.6.3, §8.7.4, §8.8.2).

The names are snake_case, as MCP-AQL §4.3 requires; the camelCase spellings of the §8.6.3 and §8.7.4
tables are accepted as deprecated aliases (docs/aql.md, "Parameter names").

`execute_agent` accepts the §8.7.4 elements an agent may set for itself, but only to tighten the
adapter's policy: a lower `max_autonomous_steps`, a more cautious `risk_tolerance`, more `deny` or
`requires_approval` patterns. There is no `autoApprove`: an agent cannot exempt its own actions.
Every pattern is matched against every step of the run, so what an agent adds is bounded: 100 per
list, 200 characters each, 4,000 characters in all (docs/safety.md "Limits").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import Field

from aql_mcp.builtin_sections import Pattern
from aql_mcp.plugin import EXECUTION_ID_PATTERN, Params

ElementName = Field(
    min_length=1, max_length=200, description="The agent's name (display only; the agent is its principal)."
)
ExecutionId = Field(
    default=None,
    pattern=EXECUTION_ID_PATTERN,
    description="The execution_id execute_agent returned; default: the newest live one.",
)
PATTERNS = "Glob patterns added to the adapter's (an agent can only add); at most 200 characters each."
MAX_PATTERNS = 100
# What deny and requires_approval may add together, in characters (docs/safety.md "Limits").
MAX_PATTERN_CHARACTERS = 4000


class ExecuteAgent(Params):
    parameter_aliases: ClassVar[Mapping[str, str]] = {
        "maxAutonomousSteps": "max_autonomous_steps",
        "riskTolerance": "risk_tolerance",
        "requiresApproval": "requires_approval",
    }

    element_name: str = ElementName
    parameters: dict[str, Any] = Field(
        default_factory=dict, description="What the agent was asked to do (kept as given)."
    )
    max_autonomous_steps: int | None = Field(
        default=None, ge=1, description="Lower the step limit for this execution (never above the adapter's)."
    )
    risk_tolerance: Literal["conservative", "moderate", "aggressive"] | None = Field(
        default=None, description="A more cautious tolerance for this execution (a looser one is ignored)."
    )
    deny: list[Pattern] = Field(default_factory=list, max_length=MAX_PATTERNS, description=PATTERNS)
    requires_approval: list[Pattern] = Field(default_factory=list, max_length=MAX_PATTERNS, description=PATTERNS)


class RecordStep(Params):
    parameter_aliases: ClassVar[Mapping[str, str]] = {
        "stepDescription": "step_description",
        "nextActionHint": "next_action_hint",
    }

    element_name: str = ElementName
    execution_id: str | None = ExecutionId
    step_description: str | None = Field(default=None, max_length=4000, description="The action just completed.")
    outcome: Literal["success", "failure", "skipped"] | None = Field(
        default=None, description="Result of the previous step; failure pauses the execution."
    )
    next_action_hint: str = Field(
        min_length=1, max_length=4000, description="The intended next action, specific enough to evaluate."
    )
    findings: str | None = Field(default=None, max_length=8000, description="Observations from the completed step.")


class FinishExecution(Params):
    element_name: str = ElementName
    execution_id: str | None = ExecutionId
    summary: str | None = Field(default=None, max_length=4000, description="How the execution ended.")


class ConfirmOperation(Params):
    confirmation_token: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="The token of a gatekeeper CONFIRMATION_REQUIRED answer given to the agent.",
    )
    approval_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=100,
        description="The approvalId of an autonomy_pause (a paused step) or permission_pending notification.",
    )


class VerifyChallenge(Params):
    challenge_id: str = Field(min_length=1, max_length=100, description="The verificationId the agent was given.")
    code: str = Field(
        min_length=1,
        max_length=200,
        description="The code shown to the operator out of band (never to the agent).",
        json_schema_extra={"sensitive": True},
    )
