"""The `executions` settings section (config/default.yaml documents each key)."""

from __future__ import annotations

from pydantic import Field

from aql_mcp.section import Section


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
