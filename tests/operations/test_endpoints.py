"""The endpoint tools' `inputSchema`: typed for clients (the MCP Inspector warns on a property
without `type`), yet answered by the router with MCP-AQL codes (MCP-AQL operation-input schema)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from aql_mcp.operations.endpoints import INPUT_SCHEMA
from aql_mcp.settings import BUILTIN_PLUGINS
from tests.operations.client import aql_session
from tests.support.asgi import dev_settings

MODES = [("semantic", "crude"), ("semantic", "dqmo"), ("single", "crude"), ("all", "crude")]


def untyped(schema: Mapping[str, Any], path: str = "") -> Iterator[str]:
    """Every property of `schema`, at any depth (properties, items, $defs), that declares no type."""
    for name, sub in schema.get("properties", {}).items():
        where = f"{path}.{name}"
        if not isinstance(sub, Mapping):
            continue
        if not ({"type", "$ref", "anyOf", "oneOf", "allOf", "enum", "const"} & set(sub)):
            yield where
        yield from untyped(sub, where)
    items = schema.get("items")
    if isinstance(items, Mapping):
        yield from untyped(items, f"{path}[]")
    for name, sub in schema.get("$defs", {}).items():
        yield from untyped(sub, f"$defs.{name}")
    for key in ("anyOf", "oneOf", "allOf"):
        for index, sub in enumerate(schema.get(key, ())):
            yield from untyped(sub, f"{path}.{key}[{index}]")


def test_the_endpoint_schema_declares_the_operation_input_types() -> None:
    """MCP-AQL operation-input schema: `operation` a string, `params` an object; batch items alike."""
    Draft202012Validator.check_schema(dict(INPUT_SCHEMA))
    properties = INPUT_SCHEMA["properties"]
    assert properties["operation"]["type"] == "string"
    assert properties["params"]["type"] == "object"
    assert properties["operations"]["type"] == "array"
    assert properties["operations"]["items"]["properties"]["operation"]["type"] == "string"
    assert list(untyped(INPUT_SCHEMA)) == []


@pytest.mark.anyio
@pytest.mark.parametrize(("mode", "profile"), MODES)
async def test_every_tool_listed_types_every_property_of_its_input_schema(
    tmp_path: Path, mode: str, profile: str
) -> None:
    builtins = {"plugins": [], "builtin_plugins": list(BUILTIN_PLUGINS)}
    settings = dev_settings(tmp_path, server=builtins, aql={"mode": mode, "profile": profile})
    async with aql_session(settings) as aql:
        tools = await aql.tools()
    assert tools
    for tool in tools:
        assert tool["inputSchema"]["type"] == "object", tool["name"]
        assert list(untyped(tool["inputSchema"])) == [], tool["name"]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("arguments", "code"),
    [
        ({"operation": 7}, "VALIDATION_INVALID_TYPE"),
        ({"operation": "introspect", "params": "operations"}, "VALIDATION_INVALID_TYPE"),
        ({"operations": {"operation": "introspect"}}, "VALIDATION_INVALID_TYPE"),
        ({}, "VALIDATION_MISSING_PARAM"),
    ],
)
async def test_arguments_against_the_typed_schema_are_still_answered_with_mcp_aql_codes(
    tmp_path: Path, arguments: dict[str, Any], code: str
) -> None:
    """The schema informs clients; the router still answers every violation as an envelope."""
    settings = dev_settings(tmp_path, server={"plugins": [], "builtin_plugins": [BUILTIN_PLUGINS[0]]})
    async with aql_session(settings) as aql:
        envelope = await aql.raw("mcp_aql_read", arguments)
    assert envelope["success"] is False
    assert envelope["error"]["code"] == code


@pytest.mark.anyio
async def test_the_batch_schema_states_its_bounds_yet_the_router_answers_an_empty_or_oversized_batch(
    tmp_path: Path,
) -> None:
    """`operations` declares `minItems: 1` and `maxItems: aql.max_batch_size` for clients that check
    before sending; the tool stays self-checking, so the codes are the router's (MCP-AQL batch)."""
    server = {"plugins": [], "builtin_plugins": [BUILTIN_PLUGINS[0]]}
    settings = dev_settings(tmp_path, server=server, aql={"max_batch_size": 2})
    item = {"operation": "introspect", "params": {"query": "types"}}
    async with aql_session(settings) as aql:
        tools = await aql.tools()
        empty = await aql.raw("mcp_aql_read", {"operations": []})
        oversized = await aql.raw("mcp_aql_read", {"operations": [item] * 3})
    for tool in tools:
        batch = tool["inputSchema"]["properties"]["operations"]
        assert (batch["minItems"], batch["maxItems"]) == (1, 2), tool["name"]
    assert empty["error"]["code"] == "VALIDATION_INVALID_TYPE"
    assert oversized["error"]["code"] == "VALIDATION_PAYLOAD_TOO_LARGE"
