"""A plain tool from a typed Python function: its `inputSchema` from the signature, its handler
given validated, converted values (`Tool.from_function`; docs/plugins.md, "Typed tools").

    async def greet(name: Annotated[str, Field(description="Who to greet")], times: int = 1, *, ctx: Context) -> str:
        "Greets someone."

Each parameter is a property of the schema (required unless it has a default), typed by pydantic
from its annotation; `Annotated[..., Field(description=...)]` describes it (corporate §9.2). The
parameter annotated `Context` is the request context and stays out of the schema. A function
whose only other parameter is a `Params` model (the base of operation parameters) takes the whole
arguments object as that model, as an operation's handler does; any other pydantic model is one
nested property, as FastMCP users expect. The schema forbids unknown properties and always lists
`required` (corporate §9.2 SHOULDs).

Arguments are checked twice, each check with its own job: the registry's JSON Schema check runs
first for every tool (so a wrong JSON type is answered exactly as for a hand-written schema), then
pydantic builds the Python values (dates, enums, nested models, its own constraints); a value
pydantic refuses is answered the same way, an `isError` result starting "Invalid arguments", never
echoing the value (MCP tools, "Error Handling"; corporate §9.4).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, get_type_hints

import orjson
from pydantic import BaseModel, ConfigDict, PydanticUserError, ValidationError, create_model
from pydantic.json_schema import GenerateJsonSchema
from pydantic_core import ErrorDetails, to_jsonable_python

from aql_mcp.content import text
from aql_mcp.exceptions import ConfigError, ToolError
from aql_mcp.operations.models import Params
from aql_mcp.protocol.context import Context
from aql_mcp.registry import ToolResult

ToolFunction = Callable[..., Awaitable[Any]]
ARGUMENTS_CONFIG = ConfigDict(extra="forbid")
UNSUPPORTED_KINDS = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)


class Untitled(GenerateJsonSchema):
    """Pydantic's schema without the `title` it derives from every field name: tokens a model
    reads on every `tools/list` that say nothing the name does not."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False


class FunctionTool:
    """The handler of a typed tool: validates the arguments into the function's parameters,
    calls it with the context, and turns what it returns into a tool result."""

    def __init__(self, function: ToolFunction, name: str) -> None:
        if not inspect.iscoroutinefunction(function):
            raise ConfigError(f"tool {name!r}: the function must be `async def` (a plain def would block the service)")
        self.function = function
        hints = _hints(function, name)
        self.context, fields = _parameters(function, hints, name)
        self.parameters = tuple(fields)
        whole = _whole_model(fields)
        self.whole = whole is not None
        try:
            self.model: type[BaseModel] = whole or create_model(
                f"{name}_arguments", __config__=ARGUMENTS_CONFIG, **fields
            )
            self.input_schema = schema_of(self.model, "validation")
            self.output_schema = _output_schema(hints.get("return"))
        except PydanticUserError as exc:  # a type pydantic cannot describe in JSON Schema
            raise ConfigError(f"tool {name!r}: {exc.message}") from None

    async def __call__(self, arguments: dict[str, Any], ctx: Context) -> Any:
        try:
            values = self.model.model_validate(arguments)
        except ValidationError as exc:
            first = exc.errors(include_url=False, include_input=False)[0]
            raise ToolError(f"Invalid arguments: {describe(first)}") from None
        kwargs: dict[str, Any]
        if self.whole:
            kwargs = {self.parameters[0]: values}
        else:
            kwargs = {parameter: getattr(values, parameter) for parameter in self.parameters}
        if self.context is not None:
            kwargs[self.context] = ctx
        return to_output(await self.function(**kwargs))


def _hints(function: ToolFunction, name: str) -> dict[str, Any]:
    try:
        return get_type_hints(function, include_extras=True)
    except Exception as exc:  # an annotation naming what the module does not import
        raise ConfigError(f"tool {name!r}: cannot resolve the function's annotations ({exc})") from None


def _parameters(function: ToolFunction, hints: dict[str, Any], name: str) -> tuple[str | None, dict[str, Any]]:
    """The context parameter's name (if any) and the others as pydantic fields `(type, default)`."""
    context = None
    fields: dict[str, Any] = {}
    for parameter in inspect.signature(function).parameters.values():
        hint = hints.get(parameter.name)
        if hint is Context:
            context = parameter.name
            continue
        _check_parameter(parameter, hint, name)
        default = ... if parameter.default is inspect.Parameter.empty else parameter.default
        fields[parameter.name] = (hint, default)
    return context, fields


def _output_schema(returned: Any) -> dict[str, Any] | None:
    """A pydantic model returned is the tool's `outputSchema` (corporate §9.5)."""
    if isinstance(returned, type) and issubclass(returned, BaseModel):
        return schema_of(returned, "serialization")
    return None


def _check_parameter(parameter: inspect.Parameter, hint: Any, name: str) -> None:
    if parameter.kind in UNSUPPORTED_KINDS:
        raise ConfigError(f"tool {name!r}: parameter {parameter.name!r} must be nameable (no *args, **kwargs, /)")
    if parameter.name.startswith("_"):
        raise ConfigError(f"tool {name!r}: parameter {parameter.name!r} must not start with '_'")
    if hint is None:
        # The schema would leave the property untyped, which clients warn about (corporate §9.2).
        raise ConfigError(f"tool {name!r}: parameter {parameter.name!r} needs a type annotation")


def _whole_model(fields: Mapping[str, tuple[Any, Any]]) -> type[Params] | None:
    """The `Params` model that stands for the whole arguments object, if that is the only parameter."""
    if len(fields) != 1:
        return None
    [(hint, default)] = fields.values()
    if isinstance(hint, type) and issubclass(hint, Params) and default is ...:
        return hint
    return None


def schema_of(model: type[BaseModel], mode: Any) -> dict[str, Any]:
    """The model's JSON Schema (2020-12) as a tool declares it: no titles, `required` always there."""
    schema = model.model_json_schema(schema_generator=Untitled, mode=mode)
    schema.pop("title", None)
    schema.setdefault("properties", {})
    schema.setdefault("required", [])
    return schema


def to_output(value: Any) -> Any:
    """What the function returned, as a tool output: text, content blocks and `ToolResult` as they
    are; a pydantic model or a dict as structured content with its JSON text (MCP tools,
    "Structured Content"); anything else as its JSON text."""
    if value is None:
        return []
    if isinstance(value, (str, ToolResult)) or _is_content_list(value):
        return value
    data = value.model_dump(mode="json") if isinstance(value, BaseModel) else to_jsonable_python(value)
    body = orjson.dumps(data).decode("utf-8")
    if isinstance(data, dict):
        return ToolResult([text(body)], structured=data)
    return body


def _is_content_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, dict) and "type" in item for item in value)


def describe(error: ErrorDetails) -> str:
    """A pydantic error in the words `protocol.tools.describe` uses: where, then what is wrong."""
    path = "arguments" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error["loc"])
    return f"{path}: {error['msg']}"
