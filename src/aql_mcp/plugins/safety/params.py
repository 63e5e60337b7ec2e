"""Parameter models of the `safety` plugin: the spec's names (MCP-AQL §8.6.3, §8.7.4, §8.8.2).

`execute_agent` accepts the §8.7.4 elements an agent may set for itself, but only to tighten the
adapter's policy: a lower `maxAutonomousSteps`, a more cautious `riskTolerance`, more `deny` or
`requiresApproval` patterns. There is no `autoApprove`: an agent cannot exempt its own actions.
Every pattern is matched against every step of the run, so what an agent adds is bounded: 100 per
list, 200 characters each, 4,000 characters in all (docs/safety.md "Limits").
"""

from __future__ import annotations

from typing import Any, Literal

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
# What deny and requiresApproval may add together, in characters (docs/safety.md "Limits").
MAX_PATTERN_CHARACTERS = 4000


class ExecuteAgent(Params):
    element_name: str = ElementName
    parameters: dict[str, Any] = Field(
        default_factory=dict, description="What the agent was asked to do (kept as given)."
    )
    maxAutonomousSteps: int | None = Field(
        default=None, ge=1, description="Lower the step limit for this execution (never above the adapter's)."
    )
    riskTolerance: Literal["conservative", "moderate", "aggressive"] | None = Field(
        default=None, description="A more cautious tolerance for this execution (a looser one is ignored)."
    )
    deny: list[Pattern] = Field(default_factory=list, max_length=MAX_PATTERNS, description=PATTERNS)
    requiresApproval: list[Pattern] = Field(default_factory=list, max_length=MAX_PATTERNS, description=PATTERNS)


class RecordStep(Params):
    element_name: str = ElementName
    execution_id: str | None = ExecutionId
    stepDescription: str | None = Field(default=None, max_length=4000, description="The action just completed.")
    outcome: Literal["success", "failure", "skipped"] | None = Field(
        default=None, description="Result of the previous step; failure pauses the execution."
    )
    nextActionHint: str = Field(
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
