"""`tools/list` and `tools/call` (MCP 2025-11-25 server/tools; corporate §9)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

import structlog
from jsonschema import Draft4Validator, Draft6Validator, Draft7Validator, Draft201909Validator, Draft202012Validator
from jsonschema.exceptions import ValidationError

from aql_mcp.content import text
from aql_mcp.exceptions import InvalidParams, ToolError, ToolTimeout, UnknownTool, WireError
from aql_mcp.protocol.context import Context
from aql_mcp.protocol.pagination import paginate
from aql_mcp.protocol.policy import ScopeRules
from aql_mcp.protocol.results import limit_result
from aql_mcp.registry import RegisteredTool, Registry, ToolOutput, ToolResult
from aql_mcp.telemetry import AUTH_ERROR, CLIENT_ERROR, INTERNAL, OK, TIMEOUT, CallRecord, Telemetry

log = structlog.get_logger("aql_mcp.tools")


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
    ) -> None:
        self._registry = registry
        self._page_size = page_size
        self._timeout = timeout
        self._max_result_bytes = max_result_bytes
        self._rules = rules
        self._telemetry = telemetry
        self._listing: list[dict[str, Any]] | None = None
        self._checks: dict[str, tuple[RegisteredTool, ArgumentCheck | None]] = {}
        registry.on_change(self._forget)

    def _forget(self, kind: str) -> None:
        if kind == "tool":
            self._listing = None
            self._checks = {}

    async def list(self, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
        if self._listing is None:
            self._listing = [tool.to_wire() for tool in self._registry.tools()]
        page, next_cursor = paginate(self._listing, params, self._page_size)
        result: dict[str, Any] = {"tools": page}
        if next_cursor:
            result["nextCursor"] = next_cursor
        return result

    async def call(self, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
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
        with self._telemetry.tool_call(name if entry else "unknown", ctx, params.get("_meta")) as record:
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
            return ToolResult([text(refusal)], is_error=True).to_wire()
        error = None
        if not self._passes_check(entry, arguments):
            error = next(iter(entry.validator.iter_errors(arguments)), None)
        if error is not None:
            record.outcome = CLIENT_ERROR
            # Arguments the model can fix are a result it can read, not a protocol error (§9.4).
            return ToolResult([text(f"Invalid arguments: {describe(error)}")], is_error=True).to_wire()
        try:
            # asyncio's own timeout: the service runs on asyncio, and anyio's deadline scope costs more
            # per call (it looks up the backend and keeps per-task state).
            async with asyncio.timeout(self._timeout):
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

    def _passes_check(self, entry: RegisteredTool, arguments: dict[str, Any]) -> bool:
        """True when the tool's plain check proves the arguments valid; False means "ask jsonschema"."""
        cached = self._checks.get(entry.tool.name)
        if cached is None or cached[0] is not entry:
            cached = self._checks[entry.tool.name] = (entry, compile_check(entry))
        check = cached[1]
        return check is not None and check(arguments)


async def run_tool(handler: Any, arguments: dict[str, Any], ctx: Context, name: str) -> tuple[dict[str, Any], str]:
    """The handler's result as wire dict, and the outcome class of the call."""
    try:
        output: ToolOutput = await handler(arguments, ctx)
    except ToolError as exc:
        return ToolResult([text(str(exc) or "The tool failed")], is_error=True).to_wire(), CLIENT_ERROR
    except WireError:
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


ArgumentCheck = Callable[[dict[str, Any]], bool]
ValueCheck = Callable[[Any], bool]
# Drafts in which `type`, `properties`, `required`, `additionalProperties` and `enum` mean the same
# thing (draft 3 puts `required` inside each property).
PLAIN_DRAFTS = (Draft4Validator, Draft6Validator, Draft7Validator, Draft201909Validator, Draft202012Validator)
# Keywords that never make an instance invalid; `format` only while no format checker is set.
ANNOTATIONS = frozenset(
    {"$schema", "$id", "$comment", "title", "description", "default", "examples", "deprecated", "readOnly", "writeOnly"}
)
JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
    "null": (type(None),),
}


def compile_check(entry: RegisteredTool) -> ArgumentCheck | None:
    """A plain-Python check for a flat object schema, or None when the schema needs jsonschema.

    Most tools declare `{"type": "object", "properties": {name: {"type": ...}}, "required": [...]}`;
    jsonschema spends ~13 µs per call walking that. The check answers True only when jsonschema
    would find no error, so a False (or no check) falls back to jsonschema, which words the error:
    what a caller sees is the same either way. Exact Python types are compared, so `True` is never
    an integer and `1.0` (an integer to jsonschema) takes the jsonschema path.
    """
    validator = entry.validator
    schema = validator.schema
    if not isinstance(validator, PLAIN_DRAFTS) or not isinstance(schema, Mapping):
        return None
    annotations = ANNOTATIONS | ({"format"} if getattr(validator, "format_checker", None) is None else frozenset())
    if not set(schema) <= annotations | {"type", "properties", "required", "additionalProperties"}:
        return None
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    extra = schema.get("additionalProperties", True)
    if schema.get("type", "object") != "object" or not isinstance(properties, Mapping) or not isinstance(extra, bool):
        return None
    if not isinstance(required, list) or not all(isinstance(name, str) for name in required):
        return None
    checks = {}
    for name, subschema in properties.items():
        check = _value_check(subschema, annotations)
        if check is None:
            return None
        checks[name] = check
    return _object_check(checks, tuple(required), closed=not extra)


def _value_check(schema: Any, annotations: frozenset[str]) -> ValueCheck | None:
    if schema is True or schema == {}:
        return lambda _value: True
    if not isinstance(schema, Mapping) or not set(schema) <= annotations | {"type", "enum"}:
        return None
    names = schema.get("type", list(JSON_TYPES))
    names = [names] if isinstance(names, str) else names
    if not isinstance(names, list) or not all(isinstance(n, str) and n in JSON_TYPES for n in names):
        return None
    types = frozenset(t for n in names for t in JSON_TYPES[n])
    enum = schema.get("enum")
    if enum is None:
        return lambda value: type(value) in types
    if not isinstance(enum, list) or not all(isinstance(v, str) for v in enum):
        return None
    allowed = frozenset(enum)
    return lambda value: type(value) is str and str in types and value in allowed


def _object_check(checks: dict[str, ValueCheck], required: tuple[str, ...], *, closed: bool) -> ArgumentCheck:
    def check(arguments: dict[str, Any]) -> bool:
        for name in required:
            if name not in arguments:
                return False
        for name, value in arguments.items():
            value_check = checks.get(name)
            if value_check is None:
                if closed:
                    return False
            elif not value_check(value):
                return False
        return True

    return check


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
