"""The generated `agent_prompt` shows a typed tool's real parameter types (`integer|null`, an enum's
values through its `$ref`) and never picks a state-changing tool for its example call when a
read-only one exists (corporate §10.4: instructions for each tool, examples)."""

from __future__ import annotations

import json
import re

import pytest

from aql_mcp.testing.client import plugin_client
from tests.support.typed_tools import OptionalTools

pytestmark = pytest.mark.anyio
JSON_BLOCK = re.compile(r"```json\n(.*?)\n```", re.DOTALL)


async def agent_prompt(mode: str) -> str:
    async with plugin_client(OptionalTools(), builtins=True, settings={"aql": {"mode": mode}}) as client:
        prompt = await client.get_prompt("agent_prompt")
    return str(prompt["messages"][0]["content"]["text"])


async def test_optional_and_enum_parameters_show_their_types_and_values() -> None:
    text = await agent_prompt("semantic")
    section = text[text.index("### `optional`") :]
    assert "- `limit` (integer|null, optional): Max." in section
    assert '- `color` (string|null, optional): The colour. One of ["red", "blue"].' in section
    tint = text[text.index("### `tint`") :]
    assert '- `color` (string, required): The colour. One of ["red", "blue"].' in tint
    assert "(any," not in text


@pytest.mark.parametrize("mode", ["semantic", "single", "all"])
async def test_the_example_call_is_a_read_only_tools_never_the_destructive_ones(mode: str) -> None:
    text = await agent_prompt(mode)
    examples = text[text.index("## Examples") :]
    [block] = JSON_BLOCK.findall(examples)
    call = json.loads(block)["params"]
    assert call["name"] != "tint"
    async with plugin_client(OptionalTools(), builtins=True, settings={"aql": {"mode": mode}}) as client:
        tools = {tool["name"]: tool for tool in await client.list_tools()}
        result = await client.call_tool(call["name"], call["arguments"])
    assert tools[call["name"]]["annotations"]["readOnlyHint"] is True
    assert result.get("isError", False) is False
