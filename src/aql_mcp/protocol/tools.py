"""`tools/list` and `tools/call` (MCP 2025-11-25 server/tools; corporate §9)."""

from __future__ import annotations

from typing import Any, Protocol

import structlog
from jsonschema.exceptions import ValidationError

from aql_mcp.auth.principal import withheld_reason
from aql_mcp.exceptions import InputRequired, InvalidParams, ToolError, ToolTimeout, UnknownTool, WireError
from aql_mcp.observability.telemetry import AUTH_ERROR, CLIENT_ERROR, INTERNAL, OK, TIMEOUT, CallRecord, Telemetry
from aql_mcp.protocol.content import text
from aql_mcp.protocol.context import Context
from aql_mcp.protocol.pagination import paginate
from aql_mcp.protocol.policy import ScopeRules
from aql_mcp.protocol.primitives import RegisteredTool, Registry, ToolOutput, ToolResult
from aql_mcp.protocol.result_limit import limit_result
from aql_mcp.protocol.task_mapping import (
    ModernTaskMapper,
    TaskMapper,
    check_task_request,
    declares_tasks,
    mark_task_tools,
    tasks_negotiated,
)
from aql_mcp.timeouts import deadline_after

log = structlog.get_logger("aql_mcp.tools")


class TaskLauncher(Protocol):
    """Turns a call into a task when the tool and the request allow it
    (endpoint/modern/tasks_extension.py); None: a plain call."""

    async def launch(self, entry: RegisteredTool, arguments: dict[str, Any], ctx: Context) -> dict[str, Any] | None: ...


class ToolMethods:
    """The tools family, over the registry; the wire list is built once per registry change."""

    def __init__(
        self,
        registry: Registry,
        *,
        page_size: int,
        timeout: float,
        max_result_bytes: int,
        rules: ScopeRules,
        telemetry: Telemetry,
        tasks: TaskLauncher | None = None,
        task_mapper: TaskMapper | None = None,
        modern_mapper: ModernTaskMapper | None = None,
    ) -> None:
        self._registry = registry
        self._tasks = tasks
        self._task_mapper = task_mapper
        self._modern_mapper = modern_mapper
        self._page_size = page_size
        self._timeout = timeout
        self._max_result_bytes = max_result_bytes
        self._rules = rules
        self._telemetry = telemetry
        self._listing: list[dict[str, Any]] | None = None
        registry.on_change(self._forget)

    def _forget(self, kind: str) -> None:
        if kind == "tool":
            self._listing = None

    async def list(self, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
        if self._listing is None:
            self._listing = [tool.to_wire() for tool in self._registry.tools()]
        page, next_cursor = paginate(self._listing, params, self._page_size)
        result: dict[str, Any] = {"tools": page}
        if next_cursor:
            result["nextCursor"] = next_cursor
        if self._task_mapper is not None and tasks_negotiated(ctx):
            return mark_task_tools(result, self._task_mapper.task_tools())
        return result

    async def call(self, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
        """A plain call, or one a plugin's task mapper turns into a task around the plain call
        (protocol/task_mapping.py): in a legacy session that negotiated tasks when `params.task` is
        set, in a modern request that declares the Tasks extension when the mapper takes the call."""
        mapper = self._task_mapper
        if mapper is not None and params.get("task") is not None and tasks_negotiated(ctx):
            check_task_request(params, mapper.task_tools())
            mapper.begin(params, ctx)
            return await mapper.finish(await self._plain_call(params, ctx), ctx)
        modern = self._modern_mapper
        if modern is not None and declares_tasks(ctx) and modern.begin(params, ctx):
            return await modern.finish(await self._plain_call(params, ctx), ctx)
        return await self._plain_call(params, ctx)

    async def _plain_call(self, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
        name = params.get("name")
        arguments = params.get("arguments")
        if arguments is None:
            arguments = {}
        if not isinstance(name, str):
            raise InvalidParams(data={"field": "name", "reason": "required"})
        if not isinstance(arguments, dict):
            raise InvalidParams(data={"field": "arguments", "reason": "type"})
        entry = self._registry.tool(name)
        # Only registered names become labels and log fields: an unknown name is caller input.
        with self._telemetry.tool_call(name if entry else "unknown", ctx, known=entry is not None) as record:
            if entry is None:
                record.outcome = CLIENT_ERROR
                raise UnknownTool(data={"field": "name", "reason": "unknown"})
            return await self._call(entry, arguments, ctx, record)

    async def _call(
        self, entry: RegisteredTool, arguments: dict[str, Any], ctx: Context, record: CallRecord
    ) -> dict[str, Any]:
        name = entry.tool.name
        missing = self._rules.missing_for_tool(name, ctx.principal)
        if missing:
            record.outcome = AUTH_ERROR
            refusal = f"Permission denied: this tool needs the scope(s) {' '.join(missing)}, which the token lacks."
            if withheld_reason(ctx.principal, missing) is not None:
                refusal += " The delegation policy withholds it from this token (auth.delegation)."
            return ToolResult([text(refusal)], is_error=True).to_wire()
        error = entry.first_error(arguments)
        if error is not None:
            record.outcome = CLIENT_ERROR
            # Arguments the model can fix are a result it can read, not a protocol error (§9.4).
            return ToolResult([text(f"Invalid arguments: {describe(error)}")], is_error=True).to_wire()
        try:
            ctx.require(*entry.tool.client_capabilities)
        except ToolError as exc:  # the legacy era's answer: a result the model can read
            record.outcome = CLIENT_ERROR
            return ToolResult([text(str(exc))], is_error=True).to_wire()
        if self._tasks is not None and entry.tool.task_support is not None:
            created = await self._tasks.launch(entry, arguments, ctx)
            if created is not None:
                return created
        try:
            # One timer per loop for every call's deadline, not one per call (aql_mcp/timeouts.py).
            async with deadline_after(self._timeout):
                result, record.outcome = await run_tool(entry.tool.handler, arguments, ctx, name)
        except TimeoutError:
            # The handler was cancelled at its next await (corporate §14: -32004); a TimeoutError of
            # the handler's own is a tool failure, caught in `run_tool`, so this one is the deadline.
            record.outcome = TIMEOUT
            self._telemetry.metrics.limit_event("timeout")
            raise ToolTimeout(data={"timeoutSeconds": self._timeout}) from None
        limited = limit_result(result, self._max_result_bytes)
        if limited is not result:
            self._telemetry.metrics.limit_event("result_size")
        return limited


async def run_tool(handler: Any, arguments: dict[str, Any], ctx: Context, name: str) -> tuple[dict[str, Any], str]:
    """The handler's result as wire dict, and the outcome class of the call."""
    try:
        output: ToolOutput = await handler(arguments, ctx)
    except ToolError as exc:
        return ToolResult([text(str(exc) or "The tool failed")], is_error=True).to_wire(), CLIENT_ERROR
    except (WireError, InputRequired):
        raise
    except Exception:
        # A crash inside a tool is a tool execution error the caller sees without internals.
        log.exception("tool_failed", tool=name, request_id=ctx.request_id)
        message = f"The tool failed with an internal error (request id {ctx.request_id})"
        return ToolResult([text(message)], is_error=True).to_wire(), INTERNAL
    result = to_result(output)
    return result, CLIENT_ERROR if result.get("isError") else OK


def to_result(output: ToolOutput) -> dict[str, Any]:
    if isinstance(output, ToolResult):
        return output.to_wire()
    if isinstance(output, str):
        return {"content": [text(output)]}
    return {"content": output}


def describe(error: ValidationError) -> str:
    """A schema violation in words that name the field and the rule, never echoing the value."""
    path = "arguments" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    if error.validator == "type":
        return f"{path} must be of type {error.validator_value}"
    if error.validator in ("enum", "const"):
        return f"{path} must be one of {error.validator_value}"
    if error.validator == "required":
        required = error.validator_value if isinstance(error.validator_value, list) else []
        missing = [r for r in required if isinstance(error.instance, dict) and r not in error.instance]
        return f"{path} is missing required field(s): {', '.join(missing)}"
    if error.validator == "additionalProperties":
        return f"{path} has properties the schema does not allow"
    return f"{path} violates '{error.validator}' ({error.validator_value})"
