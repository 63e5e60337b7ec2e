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
pydantic builds the Python values in its JSON mode, the mode for JSON input (a date, enum or UUID
arrives as its JSON string), applying its own constraints; a value pydantic refuses is answered the
same way, an `isError` result starting "Invalid arguments", never echoing the value (MCP tools,
"Error Handling"; corporate §9.4): a validator of the author's own, whose message may quote the
value, and a parameter marked `json_schema_extra={"sensitive": True}` are only said to be invalid.

What the function returns must match the `outputSchema` its return annotation declares: MCP
2025-11-25 server/tools, "Output Schema", says structured content MUST conform. The value is
validated through the model and dumped with its aliases (the names the schema shows); a mismatch is
the author's bug, answered as an internal error with the request id and logged.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Awaitable, Callable, Mapping
from typing import Annotated, Any, Union, get_args, get_origin, get_type_hints

import orjson
from pydantic import BaseModel, ConfigDict, Field, PydanticUserError, TypeAdapter, ValidationError, create_model
from pydantic_core import ErrorDetails, to_jsonable_python

from aql_mcp.exceptions import ConfigError, ToolError
from aql_mcp.protocol.content import ToolResult, text
from aql_mcp.protocol.context import Context
from aql_mcp.protocol.parameter_models import BUILTIN_ERRORS, Params, validate_json_values

ToolFunction = Callable[..., Awaitable[Any]]
ARGUMENTS_CONFIG = ConfigDict(extra="forbid")
UNSUPPORTED_KINDS = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
# The content block types of MCP 2025-11-25 (schema: ContentBlock); a list of other dicts is data.
CONTENT_TYPES = frozenset({"text", "image", "audio", "resource", "resource_link"})
# Schema keywords whose value is a map of names to schemas: the names are not titles to strip.
SCHEMA_MAPS = frozenset({"properties", "$defs", "patternProperties", "dependentSchemas"})
# Keywords whose value is data, not a schema: a "title" key inside is the author's value.
SCHEMA_DATA = frozenset({"default", "examples", "const", "enum"})
UNANNOTATED = object()


class OutputMismatch(Exception):
    """The function returned what its return annotation's model refuses: a bug of the tool, answered
    as an internal error (the message names the places, never the values)."""


class FunctionTool:
    """The handler of a typed tool: validates the arguments into the function's parameters,
    calls it with the context, and turns what it returns into a tool result."""

    def __init__(self, function: ToolFunction, name: str, *, typed_output: bool = True) -> None:
        if not inspect.iscoroutinefunction(function):
            raise ConfigError(f"tool {name!r}: the function must be `async def` (a plain def would block the service)")
        self.function = function
        self.name = name
        hints = _hints(function, name)
        self.context, fields = _parameters(function, hints, name)
        whole = _whole_model(fields)
        self.whole = whole is not None
        # Parameter name -> model field name: a name BaseModel already uses (`schema`, `copy`) is
        # an alias of a field with another name, so the schema still shows the parameter's name.
        self.parameters = {parameter: parameter for parameter in fields}
        if whole is None:
            fields = self._aliased(fields)
        returned = hints.get("return", UNANNOTATED)
        self.may_return_content = _may_be_content(returned)
        try:
            self.model: type[BaseModel] = whole or create_model(
                f"{name}_arguments", __config__=ARGUMENTS_CONFIG, **fields
            )
            self.input_schema = schema_of(self.model, "validation")
            self.output_model = _output_model(returned) if typed_output else None
            self.output_schema = None if self.output_model is None else _output_schema(self.output_model, name)
        except PydanticUserError as exc:  # a type pydantic cannot describe in JSON Schema
            raise ConfigError(f"tool {name!r}: {exc.message}") from None
        self.output: TypeAdapter[Any] | None = None if self.output_model is None else TypeAdapter(self.output_model)

    def _aliased(self, fields: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for parameter, (hint, default) in fields.items():
            field = parameter
            while hasattr(BaseModel, field) or field in fields or field in out:
                field += "_"
            if field != parameter:
                self.parameters[parameter] = field
                hint = Annotated[hint, Field(alias=parameter)]
            out[field] = (hint, default)
        return out

    async def __call__(self, arguments: dict[str, Any], ctx: Context) -> Any:
        try:
            values = validate_json_values(self.model, arguments)
        except ValidationError as exc:
            first = exc.errors(include_url=False, include_input=False)[0]
            raise ToolError(f"Invalid arguments: {describe(first, self.model)}") from None
        kwargs: dict[str, Any]
        if self.whole:
            kwargs = {next(iter(self.parameters)): values}
        else:
            kwargs = {parameter: getattr(values, field) for parameter, field in self.parameters.items()}
        if self.context is not None:
            kwargs[self.context] = ctx
        returned = await self.function(**kwargs)
        if self.output is not None and not isinstance(returned, ToolResult):
            return self._structured(returned)
        return to_output(returned, content=self.may_return_content)

    def _structured(self, returned: Any) -> ToolResult:
        """The returned value through the declared model, as structured content and its JSON text."""
        assert self.output is not None
        try:
            data = self.output.dump_python(self.output.validate_python(returned), mode="json", by_alias=True)
        except ValidationError as exc:
            places = ", ".join(_path(e["loc"], "result") for e in exc.errors(include_url=False, include_input=False))
            raise OutputMismatch(
                f"tool {self.name!r} returned a value its output schema refuses (at {places})"
            ) from None
        return ToolResult([text(orjson.dumps(data).decode("utf-8"))], structured=data)


def _hints(function: ToolFunction, name: str) -> dict[str, Any]:
    try:
        return get_type_hints(function, include_extras=True)
    except NameError:
        if "Context" not in function.__globals__:
            # `Context` imported only under `if TYPE_CHECKING:` (aql_mcp.plugin's, the only one a
            # plugin imports): the one name resolved on the plugin's behalf, never shadowing its own.
            try:
                return get_type_hints(function, localns={"Context": Context}, include_extras=True)
            except Exception:  # noqa: S110 (the first error is the one to report)
                pass
        return _unresolved(function, name)
    except Exception:
        return _unresolved(function, name)


def _unresolved(function: ToolFunction, name: str) -> dict[str, Any]:
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
        if _is_context(hint):
            context = parameter.name
            continue
        _check_parameter(parameter, hint, name)
        default = ... if parameter.default is inspect.Parameter.empty else parameter.default
        fields[parameter.name] = (hint, default)
    return context, fields


def _is_context(hint: Any) -> bool:
    """`Context`, also as `Context | None`, `Optional[Context]` or `Annotated[Context, ...]`."""
    origin = get_origin(hint)
    if origin is Annotated:
        return _is_context(get_args(hint)[0])
    if origin in (Union, types.UnionType):
        members = [member for member in get_args(hint) if member is not type(None)]
        return len(members) == 1 and _is_context(members[0])
    return hint is Context


def _output_model(returned: Any) -> type[BaseModel] | None:
    """A pydantic model returned is the tool's `outputSchema` (corporate §9.5)."""
    if isinstance(returned, type) and issubclass(returned, BaseModel):
        return returned
    return None


def _output_schema(model: type[BaseModel], name: str) -> dict[str, Any]:
    """The model's serialisation schema; MCP's `outputSchema` is an object schema, so a root model of
    a list or a scalar is refused at startup (return a model with a field holding it)."""
    schema: dict[str, Any] = _untitled(model.model_json_schema(mode="serialization"))
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):  # a recursive model: its root inline
        schema = {**schema.get("$defs", {}).get(ref.removeprefix("#/$defs/"), {}), "$defs": schema["$defs"]}
    if schema.get("type") != "object":
        raise ConfigError(
            f"tool {name!r}: the return model's schema is not an object (MCP outputSchema must be "
            "type object); return a model with a field that holds the value"
        )
    schema.setdefault("properties", {})
    schema.setdefault("required", [])
    return schema


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


def _may_be_content(returned: Any) -> bool:
    """Whether the return annotation allows a list of content blocks: none, `Any`, or a list of
    dicts (`list[Content]` is `list[dict[str, Any]]`), alone or in a union. A list of ints, of
    models, a model, a string... is data, whatever its items look like."""
    if returned is UNANNOTATED or returned is Any:
        return True
    origin = get_origin(returned)
    if origin is Annotated:
        return _may_be_content(get_args(returned)[0])
    if origin in (Union, types.UnionType):
        return any(_may_be_content(member) for member in get_args(returned))
    if returned is list or origin is list:
        [item] = get_args(returned) or (Any,)
        return item is Any or item is dict or get_origin(item) is dict
    return False


def schema_of(model: type[BaseModel], mode: Any) -> dict[str, Any]:
    """The model's JSON Schema (2020-12) as a tool declares it: no titles, `required` always there."""
    schema: dict[str, Any] = _untitled(model.model_json_schema(mode=mode))
    schema.setdefault("properties", {})
    schema.setdefault("required", [])
    return schema


def _untitled(node: Any) -> Any:
    """The schema without the `title` keywords pydantic derives from every model and field name,
    nested `$defs` included: tokens a model reads on every `tools/list` that say nothing the name
    does not. A property *named* `title`, and data (defaults, examples), keep theirs."""
    if isinstance(node, list):
        return [_untitled(item) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "title" and isinstance(value, str):
            continue
        if key in SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {name: _untitled(member) for name, member in value.items()}
        elif key in SCHEMA_DATA:
            out[key] = value
        else:
            out[key] = _untitled(value)
    return out


def to_output(value: Any, *, content: bool = True) -> Any:
    """What the function returned, as a tool output: text and `ToolResult` as they are; a non-empty
    list of MCP content blocks as content when the return annotation allows it (`content`); a
    pydantic model or a dict as structured content with its JSON text (MCP tools, "Structured
    Content"), dumped with its aliases; anything else, an empty list too, as its JSON text."""
    if value is None:
        return []
    if isinstance(value, (str, ToolResult)) or (content and _is_content_list(value)):
        return value
    if isinstance(value, BaseModel):
        data = value.model_dump(mode="json", by_alias=True)
    else:
        data = to_jsonable_python(value, by_alias=True)
    body = orjson.dumps(data).decode("utf-8")
    if isinstance(data, dict):
        return ToolResult([text(body)], structured=data)
    return body


def _is_content_list(value: Any) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(item, dict) and item.get("type") in CONTENT_TYPES for item in value)
    )


def describe(error: ErrorDetails, model: type[BaseModel] | None = None) -> str:
    """A pydantic error in the words `protocol.tools.describe` uses: where, then what is wrong;
    only where, for a message that may quote the value (a validator's own, a sensitive parameter)."""
    path = _path(error["loc"], "arguments")
    if error["type"] not in BUILTIN_ERRORS or _sensitive(model, error["loc"]):
        return f"{path} is invalid"
    return f"{path}: {error['msg']}"


def _path(location: tuple[int | str, ...], root: str) -> str:
    return root + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in location)


def _sensitive(model: type[BaseModel] | None, location: tuple[int | str, ...]) -> bool:
    """Whether the top-level parameter is marked `json_schema_extra={"sensitive": True}`, as an
    operation's parameter is (its value is never repeated)."""
    if model is None or not location:
        return False
    for name, field in model.model_fields.items():
        if location[0] in (name, field.alias):
            extra = field.json_schema_extra
            return isinstance(extra, dict) and bool(extra.get("sensitive"))
    return False
