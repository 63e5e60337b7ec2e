"""MCP 2025-11-25 tasks, the core's side: the extension point a plugin fills to run task-augmented
`tools/call`s as work of its own (the executions plugin maps them onto executions, docs/executions.md
"MCP tasks"; docs/plugins.md "HTTP routes, banner lines and legacy tasks").

Only in the legacy era, and only for a session whose client declared `tasks` in `initialize`
(2025-11-25 tasks, "Capabilities"): the core's `tools/list` marks the mapper's tools with
`execution.taskSupport: "optional"`, the core's `tools/call` checks the request's `task` and hands
the call to the mapper around the plain call, and the legacy method table adds the mapper's `tasks/*`
methods. For any other request `params.task` is ignored, as the specification requires of a receiver
that did not declare the capability.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol, runtime_checkable

from aql_mcp.exceptions import InvalidParams, MethodNotFound
from aql_mcp.protocol.context import Context
from aql_mcp.protocol.versions import MODERN_VERSIONS

TaskHandler = Callable[[dict[str, Any], Context], Awaitable[dict[str, Any]]]


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
