"""The operations of the `executions` plugin as MCP-AQL declares them (§8.4.5 `lifecycle`).

The handlers they are bound to are declared below as `ExecutionHandlers` (operations.py's
`Executions` is the one), so that this catalog does not import the module that imports it.
"""

from __future__ import annotations

from typing import Any, Protocol

from aql_mcp.plugin import Call, Example, Lifecycle, Operation, Returns
from aql_mcp.plugins.executions.params import ExecutionRef, ExportParams, ImportParams, ListExecutions


class ExecutionHandlers(Protocol):
    async def execute_import(self, params: ImportParams, call: Call) -> dict[str, Any]: ...
    async def execute_export(self, params: ExportParams, call: Call) -> dict[str, Any]: ...
    async def get_execution(self, params: ExecutionRef, call: Call) -> dict[str, Any]: ...
    async def list_executions(self, params: ListExecutions, call: Call) -> dict[str, Any]: ...
    async def cancel_execution(self, params: ExecutionRef, call: Call) -> dict[str, Any]: ...
    async def retry_execution(self, params: ExecutionRef, call: Call) -> dict[str, Any]: ...


EXECUTION = Returns(
    "Execution",
    "object",
    "{execution_id, status, kind, collection, created_at, updated_at, started_at?, finished_at?, "
    "progress: {current, total?, message?}, attempts, imported?, rejected?, report?, error?, result?}",
)
# Imports and exports: cancellable between batches, retried from where they stopped, with progress.
LIFECYCLE = Lifecycle(supports_cancel=True, supports_retry=True, progress_reporting=True)
REF = {"execution_id": "exec_0123456789abcdef01234567"}
# What starting one costs of the caller's rate budget (docs/aql.md, "Cost of a call"): the call answers
# at once, but the work it starts reads or writes a whole collection, batch after batch, like many calls.
BACKGROUND_COST = 5


def catalog(executions: ExecutionHandlers) -> list[Operation]:
    """Starting an execution, reading executions, then steering one (introspection keeps this order)."""
    return [*_starting(executions), *_reading(executions), *_steering(executions)]


def _starting(executions: ExecutionHandlers) -> list[Operation]:
    return [
        Operation(
            "execute_import",
            "EXECUTE",
            "Import records into a collection from NDJSON or CSV (base64) in the background: answers at once "
            "with execution_id; rows are validated one by one and rejected ones reported (row and reason).",
            executions.execute_import,
            ImportParams,
            EXECUTION,
            danger="reversible",
            danger_reasons=("Adds records, counted against the tenant's quotas; they can be deleted again",),
            side_effects="Adds the payload's valid rows as records, in atomic batches.",
            lifecycle=LIFECYCLE,
            cost=BACKGROUND_COST,
            examples=(
                Example(
                    {
                        "operation": "execute_import",
                        "params": {
                            "collection": "notes",
                            "file_content": "eyJ0aXRsZSI6ICJQbGFuIn0K",
                            "file_encoding": "base64",
                            "file_mime_type": "application/x-ndjson",
                        },
                    }
                ),
            ),
        ),
        Operation(
            "execute_export",
            "EXECUTE",
            "Export a collection to NDJSON in the background; once completed it is readable as the resource "
            "records://exports/{execution_id} when it fits one answer, else in parts: "
            "records://exports/{execution_id}/parts/{part}, part 0 to result.parts - 1, concatenated in order.",
            executions.execute_export,
            ExportParams,
            EXECUTION,
            danger="safe",
            side_effects="Keeps a copy of the collection's records as NDJSON until the execution's retention ends.",
            lifecycle=LIFECYCLE,
            cost=BACKGROUND_COST,
            examples=(Example({"operation": "execute_export", "params": {"collection": "notes"}}),),
        ),
    ]


def _reading(executions: ExecutionHandlers) -> list[Operation]:
    return [
        Operation(
            "get_execution",
            "READ",
            "An execution's state, progress, rejected rows and result (MCP-AQL 8.4.3); execute_agent's runs too "
            "(kind agent).",
            executions.get_execution,
            ExecutionRef,
            EXECUTION,
            examples=(Example({"operation": "get_execution", "params": REF}),),
        ),
        Operation(
            "list_executions",
            "READ",
            "The caller's executions of every kind (import, export, agent), newest first, optionally in one state.",
            executions.list_executions,
            ListExecutions,
            Returns("ExecutionList", "object", "{items: [Execution], count}"),
            discovery=True,
        ),
    ]


def _steering(executions: ExecutionHandlers) -> list[Operation]:
    return [
        Operation(
            "cancel_execution",
            "EXECUTE",
            "Cancel a pending or running execution: it stops before its next batch; batches already written stay. "
            "An agent run (execute_agent) becomes cancelled and the safety loop refuses its further steps.",
            executions.cancel_execution,
            ExecutionRef,
            EXECUTION,
            danger="reversible",
            danger_reasons=("Stops the work; what was written stays, and the import or export can be run again",),
            side_effects="The execution becomes cancelled (terminal).",
            lifecycle=LIFECYCLE,
            idempotent=True,
            examples=(Example({"operation": "cancel_execution", "params": REF}),),
        ),
        Operation(
            "retry_execution",
            "EXECUTE",
            "Run a failed execution again on this replica; an import resumes after the last batch it wrote.",
            executions.retry_execution,
            ExecutionRef,
            EXECUTION,
            danger="reversible",
            side_effects="The failed execution becomes running again.",
            lifecycle=LIFECYCLE,
            cost=BACKGROUND_COST,
            examples=(Example({"operation": "retry_execution", "params": REF}),),
        ),
    ]
