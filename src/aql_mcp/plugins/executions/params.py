"""Parameter models of the `executions` plugin; introspection reads their descriptions."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from aql_mcp.plugin import EXECUTION_ID_PATTERN, Params
from aql_mcp.plugins.records.params import NAME_PATTERN

ExecutionId = Field(
    pattern=EXECUTION_ID_PATTERN,
    description="The execution's id, as execute_import, execute_export or execute_agent returned it.",
)
CollectionName = Field(pattern=NAME_PATTERN, description="Collection name (it must exist).")


class ImportParams(Params):
    collection: str = CollectionName
    file_content: str = Field(
        min_length=1,
        description="The rows, base64 (RFC 4648, standard alphabet with padding; MCP-AQL 4.7.4): NDJSON, one "
        "JSON object a line, or CSV with a header row naming the fields.",
    )
    file_encoding: Literal["base64"] = Field(description="Always 'base64' (MCP-AQL 4.7.4).")
    file_mime_type: Literal["application/x-ndjson", "application/jsonl", "text/csv"] = Field(
        description="application/x-ndjson (or application/jsonl) for NDJSON, text/csv for CSV."
    )


class ExportParams(Params):
    collection: str = CollectionName


class ExecutionRef(Params):
    execution_id: str = ExecutionId


class ListExecutions(Params):
    status: Literal["pending", "running", "completed", "failed", "cancelled"] | None = Field(
        default=None, description="Only executions in this state."
    )
    first: int = Field(default=20, ge=1, le=100, description="How many, newest first (at most 100).")
