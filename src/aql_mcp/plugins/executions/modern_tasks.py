"""Executions as 2026-07-28 tasks (Tasks extension, SEP-2663; docs/executions.md, "MCP tasks
(2026-07-28)"): the plugin's `ModernTaskMapper`, which the core's `tools/call` and `tasks/*`
consult (protocol/task_mapping.py).

A modern request that declares the extension and calls an MCP-AQL tool with `execute_import`,
`execute_export`, or an operation an execution source starts (`execute_agent` of the safety plugin)
runs as the plain call does, and is answered with a `CreateTaskResult` whose `taskId` is the
`execution_id`. The execution's row is the task: `tasks/get`, `tasks/update` and `tasks/cancel` read
and change it on any replica, and `get_execution` reads the same execution.

A task is bound to the principal that started it, an execution to the records tenant: as in the
2025-11-25 mapping (legacy_tasks.py), another principal's execution is no task of the caller's.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any, Protocol

from aql_mcp.plugin import (
    EXECUTION_ID_PATTERN,
    INTERNAL_ERROR,
    RATE_LIMIT_QUOTA_EXHAUSTED,
    Call,
    Context,
    ExecutionSources,
    OperationError,
    success,
    to_tool_result,
)
from aql_mcp.plugins.executions.legacy_tasks import AS_TASK, TASK_OPERATIONS, TaskedExecutions, principal_digest
from aql_mcp.plugins.executions.store import ExecutionRecord
from aql_mcp.plugins.executions.wire import execution_wire
from aql_mcp.plugins.records.store import timestamp

POLL_INTERVAL_MS = 1000
# JSON-RPC 2.0's "Internal error": what a failed task's `error` carries, the MCP-AQL error in its data.
JSONRPC_INTERNAL_ERROR = -32603
STATUS = {"pending": "working", "running": "working", "completed": "completed", "failed": "failed"}
# An agent run's own state and the task status it is (docs/executions.md, "Agent runs"): a paused or
# blocked run still lives, waiting for a human; an aborted one ended abnormally.
AGENT_STATUS = {
    "running": "working",
    "paused": "working",
    "blocked": "working",
    "completed": "completed",
    "aborted": "failed",
    "cancelled": "cancelled",
}
# Failures a new call may get past: the replica running it went away, or a quota that frees up.
RETRYABLE_CODES = (INTERNAL_ERROR, RATE_LIMIT_QUOTA_EXHAUSTED)
_ID = re.compile(EXECUTION_ID_PATTERN)


class SourcedExecutions(TaskedExecutions, Protocol):
    """What the mapping reads of the plugin's operations (`Executions` in operations.py): the store,
    and the other plugins' execution sources (agent runs)."""

    @property
    def sources(self) -> ExecutionSources: ...


class ExecutionTasks:
    """The 2026-07-28 task mapper of executions: which calls run as tasks, and the task of an
    execution or agent run."""

    def __init__(self, executions: SourcedExecutions, *, task_tools: Callable[[], set[str]]) -> None:
        self._executions = executions
        self._task_tools = task_tools

    def owns(self, task_id: str) -> bool:
        return _ID.fullmatch(task_id) is not None

    def begin(self, params: dict[str, Any], ctx: Context) -> bool:
        """The call starts an execution (its operation is one that does, on a tool that carries it):
        marked so the operation answers at once and the execution is never retried."""
        arguments = params.get("arguments")
        operation = arguments.get("operation") if isinstance(arguments, dict) else None
        if params.get("name") not in self._task_tools() or operation not in self.operations():
            return False
        ctx.memo[AS_TASK] = True
        return True

    def operations(self) -> set[str]:
        """The plugin's two and those the execution sources name (read at call time: plugins register
        in any order). A source's starting operation is an EXECUTE one, carried by the same tools."""
        started = {name for source in self._executions.sources for name in getattr(source, "starts", ())}
        return set(TASK_OPERATIONS) | started

    async def finish(self, result: dict[str, Any], ctx: Context) -> dict[str, Any]:
        envelope = result.get("structuredContent")
        data = envelope.get("data") if isinstance(envelope, dict) and envelope.get("success") else None
        if not isinstance(data, dict) or not isinstance(data.get("execution_id"), str):
            # Refused before any execution existed (validation, scopes, limits, a confirmation
            # declined): no task was created, so the answer is the plain call's.
            return result
        task = await self.get(data["execution_id"], ctx)
        if task is None:
            return result
        if task["status"] != "working":
            # The seed state (SEP-2663 "Task Creation"): the work started with this answer, even one
            # that ended in the meantime; the first `tasks/get` says how it ended.
            task = {key: value for key, value in task.items() if key not in ("result", "error")}
            task.update(status="working", statusMessage="started")
        return {"resultType": "task", **task}

    async def get(self, task_id: str, ctx: Context) -> dict[str, Any] | None:
        record = await self._record(task_id, ctx)
        if record is not None:
            return self.task(record)
        call = _call(ctx)
        for source in self._executions.sources:
            wire = await source.get_execution(task_id, call)
            if wire is not None:
                return self.agent_task(wire)
        return None

    async def cancel(self, task_id: str, ctx: Context) -> bool:
        """An ended execution is left as it is (SEP-2663: cancellation is cooperative); a running one
        keeps its whole batches and its worker stops at the next."""
        record = await self._record(task_id, ctx)
        if record is not None:
            await self._executions.store.cancel(record.id, record.owner, time.time(), "cancelled by tasks/cancel")
            return True
        call = _call(ctx)
        for source in self._executions.sources:
            if await source.cancel_execution(task_id, call) is not None:
                return True
        return False

    def task(self, record: ExecutionRecord) -> dict[str, Any]:
        """The DetailedTask of an execution; `ttlMs` is the retention, counted from creation (it is
        kept at least that long: the retention runs from its end)."""
        progress = record.progress
        message = progress.message or record.status
        if progress.total and record.status in ("pending", "running"):
            message = f"{message} ({progress.current} of {progress.total})"
        out = self._fields(record.id, STATUS.get(record.status, record.status), record.created_at, record.updated_at)
        out["statusMessage"] = message
        if record.status == "completed":
            out["result"] = to_tool_result(success(execution_wire(record))).to_wire()
        elif record.status == "failed":
            error = record.error or {"code": INTERNAL_ERROR, "message": "The execution failed"}
            out["statusMessage"] = f"{error.get('code')}: {error.get('message')}"
            out["error"] = failed_error(record.id, error)
        return out

    def agent_task(self, wire: dict[str, Any]) -> dict[str, Any]:
        """The DetailedTask of an agent run, from its wire form (its source's `get_execution`)."""
        state = str(wire.get("state"))
        status = AGENT_STATUS.get(state, "working")
        progress = wire.get("progress")
        message = progress.get("message") if isinstance(progress, dict) else None
        out: dict[str, Any] = {
            "taskId": wire["execution_id"],
            "status": status,
            "statusMessage": str(message or state),
            "createdAt": wire["created_at"],
            "lastUpdatedAt": wire.get("updated_at", wire["created_at"]),
            "ttlMs": self._ttl_ms(),
            "pollIntervalMs": POLL_INTERVAL_MS,
        }
        if status == "completed":
            out["result"] = to_tool_result(success(wire)).to_wire()
        elif status == "failed":
            # Ended by abort_execution: not an MCP-AQL error, and a new run is a new decision.
            reason = str(wire.get("reason") or "aborted")
            data = {"execution_id": wire["execution_id"], "state": state, "reason": reason, "retryable": False}
            message = f"The agent run was aborted: {reason}"
            out["error"] = {"code": JSONRPC_INTERNAL_ERROR, "message": message, "data": data}
        return out

    def _fields(self, task_id: str, status: str, created: float, updated: float) -> dict[str, Any]:
        return {
            "taskId": task_id,
            "status": status,
            "createdAt": timestamp(created),
            "lastUpdatedAt": timestamp(updated),
            "ttlMs": self._ttl_ms(),
            "pollIntervalMs": POLL_INTERVAL_MS,
        }

    def _ttl_ms(self) -> int:
        return self._executions.settings.executions.retention_seconds * 1000

    async def _record(self, task_id: str, ctx: Context) -> ExecutionRecord | None:
        """The caller's execution of the plugin's store: its tenant's, and started by its principal."""
        try:
            tenant = self._executions.records.tenant(_call(ctx))
        except OperationError:
            return None  # no records tenant: no execution of the store, but maybe an agent run
        record = await self._executions.store.get(task_id, tenant)
        # Another principal's execution is not its task, even within one tenant.
        if record is None or record.principal is None or record.principal != principal_digest(ctx.principal):
            return None
        return record


def failed_error(execution_id: str, error: dict[str, Any]) -> dict[str, Any]:
    """The JSON-RPC error of a failed execution's task (SEP-2663 "Task Execution Errors"): -32603, with
    the MCP-AQL error in `data` and whether the same call, made again, may succeed (a task's
    execution is never retried itself: a task has no way back from failed)."""
    data: dict[str, Any] = {
        "execution_id": execution_id,
        "aql_error": {key: error[key] for key in ("code", "message", "details") if key in error},
        "retryable": error.get("code") in RETRYABLE_CODES,
    }
    return {"code": JSONRPC_INTERNAL_ERROR, "message": f"The execution failed: {error.get('message')}", "data": data}


def _call(ctx: Context) -> Call:
    return Call(principal=ctx.principal, session_id=ctx.session_id, ctx=ctx)
