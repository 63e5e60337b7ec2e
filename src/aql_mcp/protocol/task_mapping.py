"""MCP tasks run as a plugin's own work, the core's side: the extension points a plugin fills so
that its long calls are tasks in either era (the executions plugin maps them onto executions,
docs/executions.md "MCP tasks"; docs/plugins.md "HTTP routes, banner lines and tasks").

`TaskMapper`, MCP 2025-11-25 tasks:

Only in the legacy era, and only for a session whose client declared `tasks` in `initialize`
(2025-11-25 tasks, "Capabilities"): the core's `tools/list` marks the mapper's tools with
`execution.taskSupport: "optional"`, the core's `tools/call` checks the request's `task` and hands
the call to the mapper around the plain call, and the legacy method table adds the mapper's `tasks/*`
methods. For any other request `params.task` is ignored, as the specification requires of a receiver
that did not declare the capability.

`ModernTaskMapper`, the 2026-07-28 Tasks extension (SEP-2663): for a modern request that declares
the extension, the core's `tools/call` hands the calls the mapper takes to it around the plain call,
and `tasks/get`, `tasks/update`, `tasks/cancel` of an id the mapper owns go to it instead of the
core's task table (endpoint/modern/task_methods.py). The extension has no tool-level marker: the
server decides per request, so `tools/list` is the same with or without a mapper.

`TaskStatusReporter`, task status notifications of a mapper's tasks (SEP-2663, "Task Status
Notifications"): the plugin tells it each status change of one of its tasks, wherever it happens
(its worker, a cancellation, a takeover); the core offers the change to the listen streams of the
task's owner on every replica, which read the task through the mapper's `get` to write it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol, runtime_checkable

import structlog

from aql_mcp.exceptions import InvalidParams, MethodNotFound
from aql_mcp.protocol.context import Context
from aql_mcp.protocol.versions import MODERN_VERSIONS

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
log = structlog.get_logger("aql_mcp.tasks")

TaskHandler = Callable[[dict[str, Any], Context], Awaitable[dict[str, Any]]]
# Told that task `task_id` of owner `owner` (a principal digest) changed its status.
TaskChanged = Callable[[str, str], Awaitable[None]]


@runtime_checkable
class TaskMapper(Protocol):
    """What a plugin offers to run legacy tasks: the `tasks` capability it declares, the tools whose
    calls may be tasks, the two halves of a task-augmented call, and the `tasks/*` methods."""

    @property
    def capability(self) -> dict[str, Any]: ...
    def task_tools(self) -> set[str]: ...
    def begin(self, params: dict[str, Any], ctx: Context) -> None:
        """Refuse a call that cannot be a task (raise), else mark `ctx` so the call starts one."""

    async def finish(self, result: dict[str, Any], ctx: Context) -> dict[str, Any]:
        """The `CreateTaskResult` of the plain call's `result`, or `result` when no task was created."""

    def methods(self) -> dict[str, TaskHandler]: ...


@runtime_checkable
class ModernTaskMapper(Protocol):
    """What a plugin offers to answer 2026-07-28 calls with tasks of its own (SEP-2663): which calls
    become tasks, the `CreateTaskResult` of one, and `tasks/get` / `tasks/cancel` of its ids. The
    fields it returns are a `Task`'s (`taskId`, `status`, `createdAt`, `lastUpdatedAt`, `ttlMs`,
    `pollIntervalMs`, `statusMessage`), plus `result` or `error` once the task ended (DetailedTask)."""

    def owns(self, task_id: str) -> bool:
        """Whether `task_id` has the form of the mapper's ids (its tasks are never in the core's table)."""

    def begin(self, params: dict[str, Any], ctx: Context) -> bool:
        """Whether this `tools/call` becomes a task of the mapper's; if so, mark `ctx` so the call
        starts one and answers at once. Called only for a modern request declaring the extension."""

    async def finish(self, result: dict[str, Any], ctx: Context) -> dict[str, Any]:
        """The `CreateTaskResult` (`resultType: "task"`) of the plain call's `result`, or `result`
        itself when no task was created (the call was refused before any work existed)."""

    async def get(self, task_id: str, ctx: Context) -> dict[str, Any] | None:
        """The caller's task as `tasks/get` answers it, or None: no such task of the caller's."""

    async def cancel(self, task_id: str, ctx: Context) -> bool:
        """Cancel the caller's task if it is live (an ended one is left as it is); False: no such
        task of the caller's."""


class TaskStatusReporter:
    """Where a plugin reports that one of its mapped tasks changed status (`PluginOperations.task_status`).

    The plugins register before the core's notifier exists, so the app binds it afterwards; until
    then (and in a service built without listen streams) a report goes nowhere."""

    def __init__(self) -> None:
        self._target: TaskChanged | None = None

    def bind(self, target: TaskChanged) -> None:
        self._target = target

    async def changed(self, task_id: str, owner: str) -> None:
        """Task `task_id` of `owner` (its principal's digest, `Principal.digest`) changed status. The
        streams read the task when they write it, so two quick reports cost one notification. The
        change is already stored: a failure to tell it is logged, never raised into the plugin's work
        (the client may still poll `tasks/get`)."""
        if self._target is None:
            return
        try:
            await self._target(task_id, owner)
        except Exception:
            log.warning("task_status_not_told", task_id=task_id, exc_info=True)


def declares_tasks(ctx: Context) -> bool:
    """Whether this is a modern request whose `_meta` capabilities declare the Tasks extension."""
    peer = ctx.peer
    if peer is None or peer.protocol_version not in MODERN_VERSIONS:
        return False
    extensions = peer.client_capabilities.get("extensions")
    return isinstance(extensions, Mapping) and TASKS_EXTENSION in extensions


def tasks_negotiated(ctx: Context) -> bool:
    """Whether this is a legacy session whose client declared `tasks` in `initialize`."""
    peer = ctx.peer
    return peer is not None and peer.protocol_version not in MODERN_VERSIONS and "tasks" in peer.client_capabilities


def mark_task_tools(listed: dict[str, Any], names: set[str]) -> dict[str, Any]:
    """A `tools/list` page with the tools in `names` declaring task support (2025-11-25 tasks,
    "Tool-Level Negotiation")."""
    tools = [
        {**tool, "execution": {"taskSupport": "optional"}} if tool.get("name") in names else tool
        for tool in listed.get("tools", [])
    ]
    return {**listed, "tools": tools}


def check_task_request(params: dict[str, Any], names: set[str]) -> None:
    """A task-augmented call's `task` is an object, for a tool that lists task support."""
    if not isinstance(params.get("task"), dict):
        raise InvalidParams(data={"field": "task", "reason": "type"})
    if params.get("name") not in names:
        # The tool lists no taskSupport (2025-11-25 tasks, "Tool-Level Negotiation").
        raise MethodNotFound()
