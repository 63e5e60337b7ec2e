"""MCP 2025-11-25 tasks mapped onto executions (docs/executions.md, "MCP tasks"): the plugin's
`TaskMapper`, which the core's `tools/list` and `tools/call` consult (protocol/task_mapping.py).

Only in the legacy era, and only for a session whose client declared the `tasks` capability in
`initialize`: the server then declares `tasks` (list, cancel, requests.tools.call), the MCP-AQL
tools that carry `execute_import` and `execute_export` list `execution.taskSupport: "optional"`,
and a `tools/call` with `params.task` of one of those two operations answers a `CreateTaskResult`
whose `taskId` is the execution's id. `tasks/get`, `tasks/result`, `tasks/list` and `tasks/cancel`
read and change the execution (any of the caller's executions is a task). For any other session the
methods do not exist (-32601) and `params.task` is ignored, as the specification requires of a
receiver that did not declare the capability.

Tasks are bound to the principal that started them (2025-11-25 tasks, "Security Considerations":
a task is not visible to another requestor), while executions belong to the records tenant: with a
tenant claim several principals share, each sees the tenant's executions through the MCP-AQL
operations but only its own as tasks.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import time
from collections.abc import Callable
from typing import Any, Protocol

import orjson

from aql_mcp.plugin import (
    Call,
    Context,
    InvalidParams,
    MethodNotFound,
    OperationError,
    Principal,
    Settings,
    TaskHandler,
    failure,
    success,
    to_tool_result,
)
from aql_mcp.plugin import (
    tasks_negotiated as negotiated,
)
from aql_mcp.plugins.executions.store import ExecutionRecord, ExecutionStore
from aql_mcp.plugins.executions.wire import TERMINAL, execution_wire
from aql_mcp.plugins.executions.worker import ExecutionWorker
from aql_mcp.plugins.records.operations import Records
from aql_mcp.plugins.records.store import timestamp


class TaskedExecutions(Protocol):
    """What the mapping reads of the plugin's operations (`Executions` in operations.py), declared
    here so that this module does not import the one that imports it."""

    @property
    def settings(self) -> Settings: ...
    @property
    def records(self) -> Records: ...
    @property
    def worker(self) -> ExecutionWorker: ...
    @property
    def store(self) -> ExecutionStore: ...


CAPABILITY: dict[str, Any] = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
TASK_OPERATIONS = ("execute_import", "execute_export")
RELATED = "io.modelcontextprotocol/related-task"
POLL_INTERVAL_MS = 1000
LIST_PAGE = 50
# `ctx.memo` key: the call is task-augmented; the plugin answers at once and marks the execution.
AS_TASK = "executions.as_task"
STATUS = {"pending": "working", "running": "working", "completed": "completed", "failed": "failed"}


class LegacyTasks:
    """The task mapper of executions: which calls run as tasks, the task of an execution, and the
    `tasks/*` methods."""

    def __init__(self, executions: TaskedExecutions, *, task_tools: Callable[[], set[str]]) -> None:
        self._executions = executions
        self._task_tools = task_tools

    @property
    def capability(self) -> dict[str, Any]:
        """The `tasks` server capability, declared to legacy clients that declare theirs."""
        return CAPABILITY

    def task_tools(self) -> set[str]:
        return self._task_tools()

    def methods(self) -> dict[str, TaskHandler]:
        return {
            "tasks/get": self.get,
            "tasks/result": self.result,
            "tasks/list": self.list_tasks,
            "tasks/cancel": self.cancel,
        }

    def begin(self, params: dict[str, Any], ctx: Context) -> None:
        """Only the two operations that start executions run as tasks; the call is marked so the
        operation answers at once (the core checked `task` and the tool)."""
        arguments = params.get("arguments")
        operation = arguments.get("operation") if isinstance(arguments, dict) else None
        if operation not in TASK_OPERATIONS:
            raise InvalidParams(
                "Invalid params: only execute_import and execute_export run as tasks",
                data={"field": "task", "reason": "operation", "operations": list(TASK_OPERATIONS)},
            )
        ctx.memo[AS_TASK] = True

    async def finish(self, result: dict[str, Any], ctx: Context) -> dict[str, Any]:
        envelope = result.get("structuredContent")
        data = envelope.get("data") if isinstance(envelope, dict) and envelope.get("success") else None
        if not isinstance(data, dict) or "execution_id" not in data:
            # Refused before any execution existed (validation, scopes, limits): no task was created,
            # so the answer is the refusal as the plain call gives it.
            return result
        record = await self._executions.store.load(str(data["execution_id"]))
        if record is None:
            return result
        return {
            "task": self.task(record),
            "_meta": {"io.modelcontextprotocol/model-immediate-response": f"Started execution {record.id}"},
        }

    async def get(self, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
        return self.task(await self._found(params, ctx))

    async def result(self, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
        """Waits for a terminal state (2025-11-25 tasks, "Result Retrieval"), then the CallToolResult."""
        record = await self._found(params, ctx)
        wake = self._executions.worker.changed(record.id)
        try:
            while record.status not in TERMINAL:
                wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wake.wait(), 0.5)
                found = await self._executions.store.get(record.id, record.owner)
                if found is None:
                    raise _unknown()
                record = found
        finally:
            self._executions.worker.forget(record.id)
        if record.status == "failed" and record.error is not None:
            error = record.error
            envelope = failure(str(error.get("code")), str(error.get("message")), error.get("details"))
        else:
            envelope = success(execution_wire(record))
        wire = to_tool_result(envelope).to_wire()
        wire["_meta"] = {RELATED: {"taskId": record.id}}
        return wire

    async def list_tasks(self, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
        owner = self._owner(ctx)
        before = _cursor(params.get("cursor"))
        found = await self._executions.store.list_executions(
            owner, status=None, limit=LIST_PAGE + 1, principal=principal_digest(ctx.principal), before=before
        )
        page = found[:LIST_PAGE]
        out: dict[str, Any] = {"tasks": [self.task(record) for record in page]}
        if len(found) > LIST_PAGE:
            # A keyset cursor (created_at, id): executions started meanwhile neither shift nor repeat a page.
            last = page[-1]
            out["nextCursor"] = base64.urlsafe_b64encode(orjson.dumps([last.created_at, last.id])).decode()
        return out

    async def cancel(self, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
        record = await self._found(params, ctx)
        outcome = await self._executions.store.cancel(record.id, record.owner, time.time(), "cancelled by tasks/cancel")
        if outcome != "cancelled":
            # 2025-11-25 tasks, "Task Cancellation": a terminal task's cancellation is -32602.
            raise InvalidParams(
                "Invalid params: the task has already ended", data={"field": "taskId", "reason": "terminal"}
            )
        cancelled = await self._executions.store.get(record.id, record.owner)
        return self.task(cancelled or record)

    def task(self, record: ExecutionRecord) -> dict[str, Any]:
        """The `Task` of an execution; `ttl` is the retention, counted here from creation (it is kept
        at least that long: the retention runs from the end)."""
        progress = record.progress
        message = progress.message or record.status
        if record.status == "failed" and record.error is not None:
            # 2025-11-25 tasks, "Task Status": a failed task's message says why it failed.
            message = f"{record.error.get('code')}: {record.error.get('message')}"
        elif progress.total:
            message = f"{message} ({progress.current} of {progress.total})"
        return {
            "taskId": record.id,
            "status": STATUS.get(record.status, record.status),
            "statusMessage": message,
            "createdAt": timestamp(record.created_at),
            "lastUpdatedAt": timestamp(record.updated_at),
            "ttl": self._executions.settings.executions.retention_seconds * 1000,
            "pollInterval": POLL_INTERVAL_MS,
        }

    def _owner(self, ctx: Context) -> str:
        if not negotiated(ctx):
            raise MethodNotFound()
        try:
            return self._executions.records.tenant(Call(principal=ctx.principal, session_id=ctx.session_id, ctx=ctx))
        except OperationError:
            raise _unknown() from None

    async def _found(self, params: dict[str, Any], ctx: Context) -> ExecutionRecord:
        owner = self._owner(ctx)
        task_id = params.get("taskId")
        if not isinstance(task_id, str) or not task_id:
            raise InvalidParams(data={"field": "taskId", "reason": "required"})
        record = await self._executions.store.get(task_id, owner)
        # Another principal's execution is not its task, even within one tenant.
        if record is None or record.principal != principal_digest(ctx.principal):
            raise _unknown()
        return record


def principal_digest(principal: Principal | None) -> str | None:
    """What binds a task to its principal: the digest of its subject, never the subject itself; an
    anonymous caller's executions are nobody's task (None, unlike `auth.principal.principal_key`)."""
    return None if principal is None else principal.digest


def _cursor(cursor: Any) -> tuple[float, str] | None:
    if cursor is None:
        return None
    try:
        created_at, execution_id = orjson.loads(base64.urlsafe_b64decode(str(cursor).encode()))
    except (ValueError, TypeError, binascii.Error):
        raise InvalidParams(data={"field": "cursor", "reason": "invalid"}) from None
    if not isinstance(created_at, int | float) or isinstance(created_at, bool) or not isinstance(execution_id, str):
        raise InvalidParams(data={"field": "cursor", "reason": "invalid"})
    return float(created_at), execution_id


def _unknown() -> InvalidParams:
    # Another caller's task is not found either: ids are not a way to learn what others run.
    return InvalidParams("Invalid params: no such task", data={"field": "taskId", "reason": "unknown"})
