"""The MCP-AQL agent guide served as the `mcp-aql` skill (`operations/skill.py`): it names the tools
`tools/list` shows and every operation introspection lists, in every endpoint mode, and follows the
operations served (its manifest digest changes with them)."""

from __future__ import annotations

from typing import Any

import pytest

from aql_mcp.testing.client import PluginClient, plugin_client

pytestmark = pytest.mark.anyio
SKILL = "skill://mcp-aql/SKILL.md"
REFERENCE = "skill://mcp-aql/references/operations.md"


async def text_of(client: PluginClient, uri: str) -> str:
    (content,) = (await client.request("resources/read", {"uri": uri}, name=uri))["contents"]
    text: str = content["text"]
    return text


async def operation_names(client: PluginClient) -> set[str]:
    envelope = await client.operation("introspect", {"query": "operations"})
    return {item["name"] for item in envelope["data"]["operations"]}


@pytest.mark.parametrize("mode", ["semantic", "single", "all"])
async def test_the_guide_names_every_tool_and_the_reference_every_operation(mode: str) -> None:
    async with plugin_client(builtins=True, settings={"aql": {"mode": mode}}) as client:
        tools = {tool["name"] for tool in await client.list_tools() if tool["name"].startswith("mcp_aql")}
        guide, reference = await text_of(client, SKILL), await text_of(client, REFERENCE)
        operations = await operation_names(client)
    assert tools
    for tool in tools:
        assert f"`{tool}`" in guide
    for name in operations:
        assert f"`{name}`" in reference
    assert "introspect" in guide
    assert "references/operations.md" in guide


async def test_the_manifest_follows_the_operations_served() -> None:
    async with plugin_client("aql_mcp.plugins.records:plugin") as records_only:
        fewer: dict[str, Any] = (await records_only.request("skills/get", {"uri": SKILL}))["skill"]
    async with plugin_client(builtins=True) as everything:
        more: dict[str, Any] = (await everything.request("skills/get", {"uri": SKILL}))["skill"]
    assert fewer["frontmatter"] == more["frontmatter"]
    assert [item["digest"] for item in fewer["resources"]] != [item["digest"] for item in more["resources"]]
    assert more["resources"][1]["size"] > fewer["resources"][1]["size"]
