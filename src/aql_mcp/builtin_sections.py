"""The settings sections of the built-in `records` and `corporate` plugins.

They sit below the plugins (the settings never import `aql_mcp.plugins`) and keep their top-level
names (`records.*`, `corporate.*`, `AQL_MCP_RECORDS__...`) rather than `plugins.<name>`, so
deployments written before plugin sections existed keep working; the `executions` and `safety`
plugins keep theirs in their own packages the same way (docs/plugins.md, "Plugin settings").
"""

from __future__ import annotations

from pydantic import Field

from aql_mcp.section import Section


class CorporateSettings(Section):
    """The built-in `corporate` plugin: texts that replace the generated agent brief and prompt."""

    agent_brief: str | None = None
    agent_prompt: str | None = None


class RecordsSettings(Section):
    """The built-in `records` plugin: who owns a record, and how much each owner may store."""

    tenant_claim: str = "sub"
    max_records: int = Field(default=100_000, ge=1)
    max_bytes: int = Field(default=100 * 1024 * 1024, ge=1024)
    idempotency_retention_seconds: int = Field(default=86_400, ge=60)
