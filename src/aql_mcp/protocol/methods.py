"""The MCP method table: which handler answers which method, for the legacy era."""

from __future__ import annotations

from typing import Any

from aql_mcp.exceptions import InvalidParams
from aql_mcp.jsonrpc.dispatcher import Dispatcher
from aql_mcp.observability.telemetry import Telemetry
from aql_mcp.protocol.completion import CompletionMethods
from aql_mcp.protocol.context import LOG_LEVELS, Context
from aql_mcp.protocol.policy import ScopeRules
from aql_mcp.protocol.primitives import Registry
from aql_mcp.protocol.prompts import PromptMethods
from aql_mcp.protocol.resources import ResourceMethods
from aql_mcp.protocol.skills import SkillMethods
from aql_mcp.protocol.task_mapping import ModernTaskMapper, TaskMapper
from aql_mcp.protocol.tools import TaskLauncher, ToolMethods
from aql_mcp.settings import Settings


async def ping(params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    return {}


async def set_level(params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    level = params.get("level")
    if level not in LOG_LEVELS:
        raise InvalidParams(data={"field": "level", "reason": "enum"})
    if ctx.peer is not None:
        await ctx.peer.set_log_level(str(level))
    return {}


async def initialized(params: dict[str, Any], ctx: Context) -> None:
    return None


def build_dispatcher(
    registry: Registry,
    settings: Settings,
    telemetry: Telemetry,
    tasks: TaskLauncher | None = None,
    task_mapper: TaskMapper | None = None,
    modern_mapper: ModernTaskMapper | None = None,
) -> Dispatcher[Context]:
    """Every MCP method the server declares in its capabilities, and nothing else; `tasks` turns
    calls of task-supporting tools into tasks where the request allows (endpoint/modern/tasks_extension.py),
    `task_mapper` task-augmented calls of legacy sessions and `modern_mapper` the calls a plugin
    answers with tasks of its own in the modern era (protocol/task_mapping.py)."""
    policy = settings.auth.policy
    rules = ScopeRules(tools=policy.tools, prompts=policy.prompts, resources=policy.resources)
    page_size = settings.streams.page_size
    tools = ToolMethods(
        registry,
        page_size=page_size,
        timeout=settings.limits.tool_timeout_seconds,
        max_result_bytes=settings.limits.max_result_bytes,
        rules=rules,
        telemetry=telemetry,
        tasks=tasks,
        task_mapper=task_mapper,
        modern_mapper=modern_mapper,
    )
    prompts = PromptMethods(registry, page_size=page_size, rules=rules)
    resources = ResourceMethods(registry, page_size=page_size, rules=rules)
    completion = CompletionMethods(registry)
    skills = SkillMethods(registry, page_size=page_size, rules=rules)
    return Dispatcher(
        {
            "ping": ping,
            "tools/list": tools.list,
            "tools/call": tools.call,
            "prompts/list": prompts.list,
            "prompts/get": prompts.get,
            "resources/list": resources.list,
            "resources/read": resources.read,
            "resources/templates/list": resources.templates,
            "resources/subscribe": resources.subscribe,
            "resources/unsubscribe": resources.unsubscribe,
            "completion/complete": completion.complete,
            "logging/setLevel": set_level,
            # The Skills extension, in both eras (protocol/skills.py).
            "skills/list": skills.list,
            "skills/get": skills.get,
        },
        # notifications/cancelled is handled by the transport, which owns the requests in flight.
        {"notifications/initialized": initialized},
    )


def legacy_table(dispatcher: Dispatcher[Context], task_mapper: TaskMapper | None) -> Dispatcher[Context]:
    """The 2025-11-25 era's table: the core's methods, and the `tasks/*` methods of the plugin that
    maps legacy tasks (they answer -32601 to a session that did not negotiate tasks)."""
    return dispatcher if task_mapper is None else dispatcher.extended(task_mapper.methods())
