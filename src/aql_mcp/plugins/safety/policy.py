"""An agent's policy (MCP-AQL §8.7.4): the adapter's settings tightened by what `execute_agent` asked,
and the same policy read back from the run that keeps it.

A run stores its policy under the §8.7.4 element names (`maxAutonomousSteps`, ...): they are data the
run was started with, not parameters, and runs stored by earlier releases read back unchanged.
"""

from __future__ import annotations

from typing import Any

from aql_mcp.builtin_sections import SafetySettings
from aql_mcp.plugins.safety.evaluator import Policy, Tolerance, tighter
from aql_mcp.plugins.safety.store import AgentRun


def asked_policy(asked: dict[str, Any], settings: SafetySettings) -> Policy:
    """The adapter's policy, tightened by what the agent asked for (never loosened, §8.7.4)."""
    steps = asked.get("maxAutonomousSteps")
    return _policy(
        settings,
        max_steps=min(settings.max_autonomous_steps, steps)
        if isinstance(steps, int)
        else settings.max_autonomous_steps,
        tolerance=tighter(settings.risk_tolerance, asked.get("riskTolerance")),
        deny=tuple(dict.fromkeys((*settings.deny, *asked.get("deny", ())))),
        requires_approval=tuple(dict.fromkeys((*settings.requires_approval, *asked.get("requiresApproval", ())))),
    )


def run_policy(run: AgentRun, settings: SafetySettings) -> Policy:
    """The run's policy as `execute_agent` fixed it (the adapter's settings where it said nothing)."""
    chosen = run.settings
    steps = chosen.get("maxAutonomousSteps")
    return _policy(
        settings,
        max_steps=steps if isinstance(steps, int) else settings.max_autonomous_steps,
        tolerance=tighter(settings.risk_tolerance, chosen.get("riskTolerance")),
        deny=tuple(chosen.get("deny", settings.deny)),
        requires_approval=tuple(chosen.get("requiresApproval", settings.requires_approval)),
    )


def stored_settings(policy: Policy) -> dict[str, Any]:
    """What a run keeps of its policy: the part an agent may choose."""
    return {
        "maxAutonomousSteps": policy.max_steps,
        "riskTolerance": policy.tolerance,
        "deny": list(policy.deny),
        "requiresApproval": list(policy.requires_approval),
    }


def _policy(
    settings: SafetySettings,
    *,
    max_steps: int,
    tolerance: Tolerance,
    deny: tuple[str, ...],
    requires_approval: tuple[str, ...],
) -> Policy:
    """The chosen part, and what only the adapter sets (auto-approval, risk rules)."""
    return Policy(
        max_steps=max_steps,
        tolerance=tolerance,
        deny=deny,
        requires_approval=requires_approval,
        auto_approve=settings.auto_approve,
        risk_rules={rule.pattern: rule.score for rule in settings.risk_rules},
        default_risk=settings.default_risk,
    )
