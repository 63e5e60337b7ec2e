"""The `safety` settings section (config/default.yaml documents each key)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from aql_mcp.section import Section

SafetyMode = Literal["enforcing", "monitoring", "logging", "disabled"]
RiskTolerance = Literal["conservative", "moderate", "aggressive"]
MAX_PATTERN_LENGTH = 200
# A glob pattern (docs/safety.md "Limits"): the same bound for the adapter's and an agent's own.
Pattern = Annotated[str, Field(min_length=1, max_length=MAX_PATTERN_LENGTH)]


class RiskRule(Section):
    """A risk score (0-100) for the actions a glob pattern matches (MCP-AQL §8.7.2 stage 4)."""

    pattern: Pattern
    score: int = Field(ge=0, le=100)


class SafetySettings(Section):
    """The MCP-AQL execution safety loop (§8.6-8.8, docs/safety.md): the adapter-wide defaults an
    agent's `execute_agent` may tighten but never loosen."""

    mode: SafetyMode = "enforcing"
    max_autonomous_steps: int = Field(default=50, ge=1, le=100_000)
    risk_tolerance: RiskTolerance = "moderate"
    deny: tuple[Pattern, ...] = Field(default=("drop_*", "delete_all*", "*_production*", "rm -rf*"), max_length=100)
    requires_approval: tuple[Pattern, ...] = Field(
        default=("delete_*", "*force*", "deploy_*", "git push*"), max_length=100
    )
    auto_approve: tuple[Pattern, ...] = Field(default=("read_*", "list_*", "get_*", "search_*"), max_length=100)
    risk_rules: tuple[RiskRule, ...] = (
        RiskRule(pattern="*write*", score=40),
        RiskRule(pattern="*password*", score=70),
        RiskRule(pattern="*secret*", score=70),
        RiskRule(pattern="*credential*", score=70),
        RiskRule(pattern="*sudo *", score=90),
        RiskRule(pattern="*mkfs*", score=95),
        RiskRule(pattern="*shutdown*", score=90),
    )
    default_risk: int = Field(default=10, ge=0, le=100)
    # Wall time one step's pattern matching may take on its worker thread before the step pauses.
    evaluation_budget_ms: int = Field(default=250, ge=10, le=10_000)
    # Live (running, paused or blocked) executions one agent may hold; execute_agent past it is refused.
    max_live_runs: int = Field(default=64, ge=1, le=10_000)
    challenge_ttl_seconds: float = Field(default=300.0, gt=0, le=86_400)
    max_failed_verifications: int = Field(default=10, ge=1, le=1000)
    failure_window_seconds: float = Field(default=60.0, gt=0, le=86_400)
