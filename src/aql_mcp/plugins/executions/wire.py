"""An execution as a client reads it (MCP-AQL §8.4.3): ISO 8601 times, `progress` as
`{current, total, message}`, `error` in the MCP-AQL error format when it failed."""

from __future__ import annotations

from typing import Any

from aql_mcp.plugins.executions.store import ExecutionRecord
from aql_mcp.plugins.records.store import timestamp

TERMINAL = ("completed", "failed", "cancelled")


def execution_wire(record: ExecutionRecord, *, report: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {
        "execution_id": record.id,
        "status": record.status,
        "kind": record.kind,
        "collection": record.params.get("collection"),
        "created_at": timestamp(record.created_at),
        "updated_at": timestamp(record.updated_at),
        "progress": record.progress.to_wire(),
        "attempts": record.attempts,
    }
    if record.started_at is not None:
        out["started_at"] = timestamp(record.started_at)
    if record.finished_at is not None:
        out["finished_at"] = timestamp(record.finished_at)
    if record.kind == "import":
        out["rejected"] = record.rejected
        out["imported"] = record.progress.current - record.rejected
        if report:
            out["report"] = record.report
    if record.error is not None:
        out["error"] = record.error
    if record.result is not None:
        out["result"] = record.result
    return out
