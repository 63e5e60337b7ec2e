"""Typed plain tools: `Tool.from_function` builds the inputSchema from the signature and calls the
function with validated values (protocol/signatures.py; corporate §9.1, §9.2, §9.4)."""

from __future__ import annotations

import datetime
import enum
import json
import warnings
from typing import Annotated, Any, Literal

import orjson
import pytest
from jsonschema import Draft202012Validator
from pydantic import BaseModel, Field, RootModel

from aql_mcp.exceptions import ConfigError, ToolError
from aql_mcp.plugin import Content, Context, Params, Registry, Tool, ToolResult, text
from aql_mcp.protocol.signatures import OutputMismatch, to_output

CTX: Any = None  # the handlers below never touch the context they are given


async def greet(
    name: Annotated[str, Field(description="Who to greet.")],
    times: Annotated[int, Field(description="How often.", ge=1)] = 1,
    *,
    ctx: Context,
) -> str:
    """Greets someone."""
    return " ".join([f"Hello, {name}!"] * times)


class Opaque:
    """A class pydantic has no schema for."""


class Address(BaseModel):
    city: str = Field(description="City.")


class Move(Params):
    who: str = Field(description="Who moves.")
    to: Literal["north", "south"] = Field(description="Where to.")


async def move(args: Move, ctx: Context) -> dict[str, str]:
    """Moves someone."""
    return {"who": args.who, "to": args.to}


async def post(address: Annotated[Address, Field(description="Where to send it.")]) -> Address:
    """Sends a card."""
    return address


async def schedule(on: Annotated[datetime.date, Field(description="The day.")]) -> str:
    """Schedules a day."""
    return on.isoformat()


def test_the_schema_comes_from_the_signature_without_the_context_and_with_required_from_defaults() -> None:
    tool = Tool.from_function(greet)
    schema = tool.input_schema
    Draft202012Validator.check_schema(dict(schema))
    assert tool.name == "greet"
    assert tool.description == "Greets someone."
    assert schema["type"] == "object"
    assert schema["additionalProperties"] is False
    assert set(schema["properties"]) == {"name", "times"}
    assert schema["required"] == ["name"]
    assert schema["properties"]["name"] == {"type": "string", "description": "Who to greet."}
    assert schema["properties"]["times"]["type"] == "integer"
    assert schema["properties"]["times"]["default"] == 1
    assert schema["properties"]["times"]["minimum"] == 1


def test_a_function_without_parameters_declares_an_empty_closed_object() -> None:
    """Corporate §9.2: `required` explicit even if empty, `additionalProperties: false`."""

    async def ping() -> str:
        """Answers pong."""
        return "pong"

    schema = Tool.from_function(ping).input_schema
    assert schema == {"type": "object", "properties": {}, "required": [], "additionalProperties": False}


def test_a_params_model_as_the_only_parameter_is_the_whole_arguments_object() -> None:
    schema = Tool.from_function(move).input_schema
    assert set(schema["properties"]) == {"who", "to"}
    assert schema["required"] == ["who", "to"]
    assert schema["properties"]["to"]["enum"] == ["north", "south"]
    assert schema["additionalProperties"] is False


def test_any_other_model_is_one_nested_property_and_a_model_return_is_the_output_schema() -> None:
    tool = Tool.from_function(post)
    assert set(tool.input_schema["properties"]) == {"address"}
    assert tool.output_schema is not None
    assert tool.output_schema["properties"]["city"]["type"] == "string"


def test_name_description_and_annotations_can_be_given() -> None:
    tool = Tool.from_function(greet, name="say_hello", description="Says hello.", annotations={"readOnlyHint": True})
    assert (tool.name, tool.description, tool.annotations) == ("say_hello", "Says hello.", {"readOnlyHint": True})


def test_the_registered_schema_passes_the_registry_and_a_bad_name_fails_as_for_a_hand_written_tool() -> None:
    """Corporate §9.1: the name check is the registry's, whatever built the schema."""
    registry = Registry()
    registry.add_tool(Tool.from_function(greet))
    entry = registry.tool("greet")
    assert entry is not None
    assert entry.first_error({"name": "Ada"}) is None
    assert entry.first_error({"name": 1}) is not None
    assert entry.first_error({"name": "Ada", "extra": 1}) is not None
    with pytest.raises(ConfigError):
        registry.add_tool(Tool.from_function(greet, name="Greet-Tool"))


@pytest.mark.parametrize(
    "function",
    [
        pytest.param(lambda: None, id="not-async"),
        pytest.param(None, id="no-description"),
    ],
)
def test_a_function_the_tool_cannot_be_built_from_fails_at_registration(function: Any) -> None:
    if function is None:

        async def function(name: str) -> str:
            return name

    with pytest.raises(ConfigError):
        Tool.from_function(function)


def test_star_arguments_private_names_untyped_and_undescribable_parameters_fail_at_registration() -> None:
    async def star(*names: str) -> str:
        """Stars."""
        return ""

    async def private(_name: str) -> str:
        """Private."""
        return ""

    async def untyped(name) -> str:  # type: ignore[no-untyped-def]
        """Untyped."""
        return ""

    async def opaque(thing: Opaque) -> str:
        """Takes what pydantic cannot describe."""
        return ""

    for function in (star, private, untyped, opaque):
        with pytest.raises(ConfigError):
            Tool.from_function(function)


@pytest.mark.anyio
async def test_the_function_gets_converted_values_and_the_context() -> None:
    seen: dict[str, Any] = {}

    async def record(on: Annotated[datetime.date, Field(description="Day.")], *, ctx: Context) -> str:
        """Records."""
        seen.update(on=on, ctx=ctx)
        return "ok"

    marker: Any = object()
    assert await Tool.from_function(record).handler({"on": "2026-02-03"}, marker) == "ok"
    assert seen == {"on": datetime.date(2026, 2, 3), "ctx": marker}


@pytest.mark.anyio
async def test_a_value_pydantic_refuses_is_an_invalid_arguments_tool_error_without_the_value() -> None:
    """Corporate §9.4: a fixable argument is a result the model reads; the same words as a schema error."""
    with pytest.raises(ToolError) as refused:
        await Tool.from_function(schedule).handler({"on": "secret-value"}, CTX)
    assert str(refused.value).startswith("Invalid arguments: arguments.on")
    assert "secret-value" not in str(refused.value)


@pytest.mark.anyio
async def test_a_params_model_reaches_the_function_as_the_model() -> None:
    result = await Tool.from_function(move).handler({"who": "Ada", "to": "north"}, CTX)
    assert isinstance(result, ToolResult)
    assert result.structured == {"who": "Ada", "to": "north"}


def test_outputs_become_text_content_or_structured_results() -> None:
    content = [text("hi")]
    assert to_output("hi") == "hi"
    assert to_output(content) is content
    assert to_output(None) == []
    assert to_output([1, 2]) == "[1,2]"
    model = to_output(Address(city="Oslo"))
    assert isinstance(model, ToolResult)
    assert model.structured == {"city": "Oslo"}
    assert model.content == [text('{"city":"Oslo"}')]


class Shade(enum.Enum):
    light = "light"


class Nested(BaseModel):
    shade: Shade = Field(description="Shade.")
    title: str = Field(description="A property named title keeps its name.")


class Rows(RootModel[list[int]]):
    pass


class Renamed(BaseModel):
    first_name: str = Field(serialization_alias="firstName")


@pytest.mark.anyio
async def test_an_optional_or_annotated_context_is_the_context_not_a_parameter() -> None:
    async def soft(x: int, ctx: Context | None = None) -> str:
        """Optional context."""
        return type(ctx).__name__

    async def noted(ctx: Annotated[Context, "the request"]) -> str:
        """Annotated context."""
        return type(ctx).__name__

    marker: Any = Shade.light
    for function in (soft, noted):
        tool = Tool.from_function(function)
        assert "ctx" not in tool.input_schema["properties"]
        assert await tool.handler({"x": 1} if function is soft else {}, marker) == "Shade"


@pytest.mark.anyio
async def test_a_context_imported_only_for_type_checking_is_still_the_context() -> None:
    """The module's annotations name `Context` although the module never imports it at run time."""
    namespace: dict[str, Any] = {}
    source = 'async def late(x: int, ctx: "Context") -> str:\n    """Late."""\n    return str(x)\n'
    exec(compile(source, "<late>", "exec"), namespace)  # noqa: S102 (a module without the import)
    tool = Tool.from_function(namespace["late"])
    assert list(tool.input_schema["properties"]) == ["x"]
    assert await tool.handler({"x": 2}, CTX) == "2"


def test_no_title_is_left_in_nested_definitions_but_a_property_named_title_stays() -> None:
    async def paint(nested: Annotated[Nested, Field(description="What.")]) -> str:
        """Paints."""
        return "ok"

    schema = Tool.from_function(paint).input_schema
    assert '"title": "' not in json.dumps(schema).replace('"title": {"description"', "")
    assert "title" in schema["$defs"]["Nested"]["properties"]
    assert "title" not in schema["$defs"]["Shade"]


@pytest.mark.anyio
async def test_parameters_named_like_basemodel_attributes_keep_their_names() -> None:
    async def names(schema: str, copy: int = 1) -> str:
        """Names BaseModel uses."""
        return f"{schema} {copy}"

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tool = Tool.from_function(names)
    assert list(tool.input_schema["properties"]) == ["schema", "copy"]
    assert await tool.handler({"schema": "s", "copy": 2}, CTX) == "s 2"


def test_a_root_model_that_is_not_an_object_is_refused_as_an_output_schema() -> None:
    """MCP 2025-11-25 server/tools: an `outputSchema` is an object schema."""

    async def numbers() -> Rows:
        """Numbers."""
        return Rows([1])

    with pytest.raises(ConfigError, match="numbers"):
        Tool.from_function(numbers)
    assert Tool.from_function(numbers, output_schema={"type": "object"}).output_schema == {"type": "object"}


@pytest.mark.anyio
async def test_a_returned_dict_is_validated_and_dumped_with_the_output_models_aliases() -> None:
    async def renamed() -> Renamed:
        """Renamed."""
        value: Any = {"first_name": "Ada"}
        return value  # type: ignore[no-any-return]

    async def wrong() -> Renamed:
        """Wrong."""
        value: Any = {"nope": "secret"}
        return value  # type: ignore[no-any-return]

    result = await Tool.from_function(renamed).handler({}, CTX)
    assert isinstance(result, ToolResult)
    assert result.structured == {"firstName": "Ada"}
    with pytest.raises(OutputMismatch) as refused:
        await Tool.from_function(wrong).handler({}, CTX)
    assert "secret" not in str(refused.value)


def test_only_mcp_content_block_types_are_content_and_an_empty_list_is_json() -> None:
    blocks = [{"type": "resource_link", "uri": "x://y", "name": "y"}, text("hi")]
    assert to_output(blocks) is blocks
    assert to_output([{"type": "user", "id": 1}]) == '[{"type":"user","id":1}]'
    assert to_output([]) == "[]"
    assert to_output(blocks, content=False) == orjson.dumps(blocks).decode()


@pytest.mark.anyio
async def test_a_return_annotation_that_is_not_a_list_of_dicts_never_yields_content() -> None:
    async def blocks() -> list[Content]:
        """Content blocks."""
        return [text("hi")]

    async def models() -> list[Address]:
        """Data."""
        value: Any = [text("hi")]
        return value  # type: ignore[no-any-return]

    assert await Tool.from_function(blocks).handler({}, CTX) == [text("hi")]
    assert await Tool.from_function(models).handler({}, CTX) == '[{"type":"text","text":"hi"}]'
