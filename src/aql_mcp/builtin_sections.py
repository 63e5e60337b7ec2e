"""The settings sections of the built-in plugins: `records`, `executions`, `safety` (with its console)
and `corporate` (config/default.yaml documents each key).

They keep the top-level names they had before plugin sections existed (`records.*`,
`AQL_MCP_RECORDS__...`; an outside plugin's section is `plugins.<name>`, docs/plugins.md, "Plugin
settings"), and only the core's `Settings` can give a section a top-level name. The settings sit below
every plugin (docs/architecture.md, "Layers"), so these sections are defined here, in the core, and
each plugin reads its own as `settings.<name>`.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from aql_mcp.section import Section


class RecordsSettings(Section):
    """The built-in `records` plugin: who owns a record, and how much each owner may store."""

    tenant_claim: str = "sub"
    max_records: int = Field(default=100_000, ge=1)
    max_bytes: int = Field(default=100 * 1024 * 1024, ge=1024)
    idempotency_retention_seconds: int = Field(default=86_400, ge=60)
    # Indexes a tenant's collections may declare in all (docs/store.md, "Indexed fields").
    max_indexes: int = Field(default=10, ge=0, le=100)


class ExecutionSettings(Section):
    """The `executions` plugin (docs/executions.md): background imports and exports (MCP-AQL §8.4)."""

    batch_size: int = Field(default=1000, ge=1, le=100_000)
    max_live_per_principal: int = Field(default=4, ge=1, le=1000)
    max_import_bytes: int = Field(default=16 * 1024 * 1024, ge=1024)
    report_cap: int = Field(default=100, ge=0, le=10_000)
    max_export_bytes: int = Field(default=16 * 1024 * 1024, ge=1024)
    retention_seconds: int = Field(default=86_400, ge=60)
    batch_pause_seconds: float = Field(default=0.0, ge=0, le=10)
    max_retained_bytes_per_tenant: int = Field(default=256 * 1024 * 1024, ge=1024)
    # Exports one replica writes at once; more wait their turn, `running` with the message "queued".
    max_concurrent_exports: int = Field(default=2, ge=1, le=1000)
    # The largest part of an export's NDJSON (also bounded by limits.max_result_bytes, docs/executions.md).
    export_part_bytes: int = Field(default=1024 * 1024, ge=1024)
    # How long the worker retries a write the store refused for a passing reason (a lock, a
    # serialization failure, a lost connection) before the execution fails.
    store_retry_seconds: float = Field(default=30.0, ge=0, le=3600)
    # How many times other replicas resume an execution whose replica was lost (its lease ran out);
    # past that it fails (`replica_stopped`) and waits for retry_execution. 0: never resume.
    max_takeovers: int = Field(default=3, ge=0, le=100)


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


class ConsoleSettings(Section):
    """The operator console at `/console` (docs/console.md)."""

    enabled: bool = True
    # How often an open console page's event stream re-reads the store (seconds).
    refresh_seconds: float = Field(default=2.0, ge=0.2, le=60)
    # Lifetime of the development login cookie and the token it carries (development mode only).
    cookie_seconds: int = Field(default=28_800, ge=60, le=86_400)


class CorporateSettings(Section):
    """The built-in `corporate` plugin: texts that replace the generated agent brief and prompt."""

    agent_brief: str | None = None
    agent_prompt: str | None = None
