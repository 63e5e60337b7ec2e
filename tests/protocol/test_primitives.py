from typing import Any

import pytest

from aql_mcp.exceptions import ConfigError
from aql_mcp.protocol.content import Content
from aql_mcp.protocol.context import Context
from aql_mcp.protocol.primitives import (
    EMPTY_OBJECT_SCHEMA,
    Kind,
    Prompt,
    Registry,
    Resource,
    ResourceTemplate,
    Tool,
    ToolOutput,
    ToolResult,
)


async def answer(arguments: dict[str, Any], ctx: Context) -> ToolOutput:
    return "ok"


async def prompt_text(arguments: dict[str, str], ctx: Context) -> list[Content]:
    return []


async def read(uri: str, ctx: Context) -> list[Content]:
    return []


async def read_template(uri: str, variables: dict[str, str], ctx: Context) -> list[Content]:
    return []


def tool(name: str = "do_thing", schema: dict[str, Any] | None = None) -> Tool:
    if schema is None:
        return Tool(name, "Does the thing", answer)
    return Tool(name, "Does the thing", answer, input_schema=schema)


def template(uri_template: str = "test://template/{id}/data") -> ResourceTemplate:
    return ResourceTemplate(uri_template, "template", read_template)


@pytest.mark.parametrize("name", ["ab", "do_thing", "a1", "x" * 64, "a_b_c_9"])
def test_snake_case_tool_name_is_accepted(name: str) -> None:
    registry = Registry()
    registry.add_tool(tool(name))
    assert registry.tool(name) is not None


@pytest.mark.parametrize(
    "name", ["a", "x" * 65, "DoThing", "do-thing", "do.thing", "1thing", "_thing", "do thing", "dö", ""]
)
def test_tool_name_that_is_not_snake_case_is_refused(name: str) -> None:
    registry = Registry()
    with pytest.raises(ConfigError):
        registry.add_tool(tool(name))
    assert list(registry.tools()) == []


def test_tool_name_with_a_trailing_newline_is_refused() -> None:
    with pytest.raises(ConfigError):
        Registry().add_tool(tool("do_thing\n"))


def test_template_does_not_match_a_uri_with_a_trailing_newline() -> None:
    registry = Registry()
    registry.add_resource_template(template())
    assert registry.resolve("test://template/42/data\n") is None


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "nope"},
        {"type": "object", "properties": {"a": {"type": 7}}},
        {"type": "object", "required": "a"},
        {"type": "object", "minProperties": -1},
    ],
)
def test_invalid_input_schema_is_refused_at_registration(schema: dict[str, Any]) -> None:
    registry = Registry()
    with pytest.raises(ConfigError):
        registry.add_tool(tool(schema=schema))
    assert registry.tool("do_thing") is None


def test_an_invalid_x_mcp_header_fails_registration_naming_tool_and_property() -> None:
    """MCP 2026-07-28 server/tools, "x-mcp-header": a tool with an invalid annotation is invalid."""
    registry = Registry()
    bad = {"type": "object", "properties": {"ratio": {"type": "number", "x-mcp-header": "Ratio"}}}
    with pytest.raises(ConfigError) as raised:
        registry.add_tool(tool(schema=bad))
    assert "do_thing" in str(raised.value)
    assert "ratio" in str(raised.value)
    assert registry.tool("do_thing") is None


def test_the_param_headers_a_tool_declares_are_looked_up_by_tool_name() -> None:
    registry = Registry()
    good = {"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}}
    registry.add_tool(tool(schema=good))
    assert [p.field for p in registry.param_headers("do_thing")] == ["Mcp-Param-Region"]
    assert registry.param_headers("unknown_tool") == ()


def test_tool_without_a_schema_takes_an_empty_object() -> None:
    registry = Registry()
    registry.add_tool(tool())
    entry = registry.tool("do_thing")
    assert entry is not None
    assert entry.tool.to_wire()["inputSchema"] == EMPTY_OBJECT_SCHEMA
    assert entry.validator.is_valid({})
    assert not entry.validator.is_valid({"extra": 1})


def test_input_schema_is_compiled_once_at_registration() -> None:
    registry = Registry()
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    registry.add_tool(tool(schema=schema))
    entry = registry.tool("do_thing")
    assert entry is not None
    assert entry.validator.is_valid({"n": 1})
    assert not entry.validator.is_valid({"n": "1"})


def test_input_schema_draft_is_picked_from_its_schema_keyword() -> None:
    registry = Registry()
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {"items": {"type": "array", "items": [{"type": "string"}]}},
    }
    registry.add_tool(tool(schema=schema))
    entry = registry.tool("do_thing")
    assert entry is not None
    assert not entry.validator.is_valid({"items": [1]})


@pytest.mark.parametrize(
    ("uri", "variables"),
    [
        ("test://template/42/data", {"id": "42"}),
        ("test://template/abc-DEF_1/data", {"id": "abc-DEF_1"}),
    ],
)
def test_template_matches_one_path_segment(uri: str, variables: dict[str, str]) -> None:
    registry = Registry()
    registry.add_resource_template(template())
    resolved = registry.resolve(uri)
    assert resolved is not None
    assert resolved[0].name == "template"
    assert resolved[1] == variables


@pytest.mark.parametrize(
    "uri",
    [
        "test://template//data",
        "test://template/4/2/data",
        "test://template/42/data/more",
        "test://template/42/datax",
        "xtest://template/42/data",
        "test://template/42?x=1/data",
        "test://template/42",
    ],
)
def test_template_does_not_match_other_uris(uri: str) -> None:
    registry = Registry()
    registry.add_resource_template(template())
    assert registry.resolve(uri) is None


def test_template_literal_parts_are_not_patterns() -> None:
    registry = Registry()
    registry.add_resource_template(template("test://a.b/{id}"))
    assert registry.resolve("test://a.b/1") is not None
    assert registry.resolve("test://axb/1") is None


def test_template_with_two_variables_yields_both() -> None:
    registry = Registry()
    registry.add_resource_template(template("test://{kind}/items/{id}"))
    resolved = registry.resolve("test://books/items/7")
    assert resolved is not None
    assert resolved[1] == {"kind": "books", "id": "7"}


def test_static_resource_is_preferred_to_a_matching_template() -> None:
    registry = Registry()
    registry.add_resource_template(template())
    registry.add_resource(Resource("test://template/static/data", "static", read))
    resolved = registry.resolve("test://template/static/data")
    assert resolved is not None
    assert resolved[0].name == "static"
    assert resolved[1] == {}


def test_unknown_uri_resolves_to_nothing() -> None:
    assert Registry().resolve("test://nothing") is None


@pytest.mark.parametrize(
    "add_twice",
    [
        pytest.param(lambda r: r.add_tool(tool("same_tool")), id="tool"),
        pytest.param(lambda r: r.add_prompt(Prompt("same", "Prompt", prompt_text)), id="prompt"),
        pytest.param(lambda r: r.add_resource(Resource("test://same", "same", read)), id="resource"),
        pytest.param(lambda r: r.add_resource_template(template("test://same/{id}")), id="template"),
    ],
)
def test_duplicate_name_is_refused(add_twice: Any) -> None:
    registry = Registry()
    add_twice(registry)
    with pytest.raises(ConfigError):
        add_twice(registry)


def test_same_name_in_different_kinds_is_allowed() -> None:
    registry = Registry()
    registry.add_tool(tool("shared"))
    registry.add_prompt(Prompt("shared", "Prompt", prompt_text))
    assert registry.tool("shared") is not None
    assert registry.prompt("shared") is not None


def test_removed_tool_name_can_be_registered_again() -> None:
    registry = Registry()
    registry.add_tool(tool("do_thing"))
    registry.remove_tool("do_thing")
    assert registry.tool("do_thing") is None
    registry.add_tool(tool("do_thing"))
    assert registry.tool("do_thing") is not None


def test_a_removed_prompt_is_gone_can_come_back_and_is_heard_once() -> None:
    registry = Registry()
    heard: list[Kind] = []
    registry.add_prompt(Prompt("p", "Prompt", prompt_text))
    registry.on_change(heard.append)
    registry.remove_prompt("p")
    registry.remove_prompt("p")
    assert registry.prompt("p") is None
    registry.add_prompt(Prompt("p", "Prompt", prompt_text))
    assert heard == ["prompt", "prompt"]


def test_listeners_hear_each_kind_of_change() -> None:
    registry = Registry()
    heard: list[Kind] = []
    registry.on_change(heard.append)
    registry.add_tool(tool())
    registry.add_prompt(Prompt("p", "Prompt", prompt_text))
    registry.add_resource(Resource("test://r", "r", read))
    registry.add_resource_template(template())
    registry.remove_tool("do_thing")
    registry.remove_tool("do_thing")
    assert heard == ["tool", "prompt", "resource", "resource", "tool"]


def test_listings_keep_registration_order() -> None:
    registry = Registry()
    for name in ("zeta", "alpha", "mid"):
        registry.add_tool(tool(name))
    assert [t.name for t in registry.tools()] == ["zeta", "alpha", "mid"]


def test_tool_result_wire_shape() -> None:
    content: list[Content] = [{"type": "text", "text": "x"}]
    assert ToolResult(content).to_wire() == {"content": content}
    assert ToolResult(content, structured={"a": 1}, is_error=True).to_wire() == {
        "content": content,
        "structuredContent": {"a": 1},
        "isError": True,
    }


def test_deprecated_tool_prompt_and_resource_carry_the_prefix_with_their_deadline() -> None:
    """Corporate §17.2: `[DEPRECATED]` prefix and the support deadline in the description."""

    async def nothing(*_: object) -> list[dict[str, object]]:
        return []

    tool = Tool("old_tool", "Does a thing.", nothing, deprecated_until="2027-03-01")  # type: ignore[arg-type]
    prompt = Prompt("old_prompt", "Says a thing.", nothing, deprecated_until="2027-03-01")  # type: ignore[arg-type]
    resource = Resource("doc://old", "old", nothing, description="A page.", deprecated_until="2027-03-01")  # type: ignore[arg-type]
    for wire in (tool.to_wire(), prompt.to_wire(), resource.to_wire()):
        assert wire["description"].startswith("[DEPRECATED until 2027-03-01] ")
    assert Tool("new_tool", "Fresh.", nothing).to_wire()["description"] == "Fresh."  # type: ignore[arg-type]


def test_a_tool_needing_an_unknown_client_capability_fails_registration() -> None:
    """`Tool.client_capabilities` names what a handler may ask for (2026-07-28 basic,
    "Per-request protocol fields"): elicitation, sampling or roots; anything else is a plugin bug."""
    registry = Registry()
    bad = Tool("do_thing", "Does the thing", tool().handler, client_capabilities=("elicitation", "telepathy"))
    with pytest.raises(ConfigError) as raised:
        registry.add_tool(bad)
    assert "telepathy" in str(raised.value)
    assert registry.tool("do_thing") is None
    registry.add_tool(Tool("do_thing", "Does the thing", tool().handler, client_capabilities=("sampling",)))
    assert registry.tool("do_thing") is not None
