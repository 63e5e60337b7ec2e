"""Introspection shows what an operation does by default and names only tools that exist
(MCP-AQL introspection §3.4, MCP-AQL §4.7.5; issue 12)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.operations.client import Aql, aql_session, records_settings

pytestmark = pytest.mark.anyio


async def _parameters(aql: Aql, tool: str, operation: str) -> dict[str, dict[str, Any]]:
    found = await aql.call(tool, "introspect", query="operations", name=operation)
    return {info["name"]: info for info in found["data"]["operation"]["parameters"]}


async def test_listings_document_their_page_sizes_and_default_field_preset(tmp_path: Path) -> None:
    settings = records_settings(tmp_path, aql={"default_page_size": 7, "max_page_size": 40})
    async with aql_session(settings) as aql:
        records = await _parameters(aql, "mcp_aql_read", "list_records")
        search = await _parameters(aql, "mcp_aql_read", "search_records")
        collections = await _parameters(aql, "mcp_aql_read", "list_collections")
        one = await _parameters(aql, "mcp_aql_read", "get_record")
        made = await _parameters(aql, "mcp_aql_read", "create_collection")
    for listing in (records, collections):
        assert (listing["first"]["default"], listing["first"]["minimum"], listing["last"]["minimum"]) == (7, 1, 1)
        # Clamped, not refused (MCP-AQL pagination §5.3): the cap is said in words, not as a bound.
        assert "maximum" not in listing["first"]
        assert "maximum" not in listing["last"]
        assert "40" in listing["first"]["description"]
        assert "40" in listing["last"]["description"]
    assert records["fields"]["default"] == "standard"
    assert search["fields"]["default"] == "minimal"
    assert one["fields"]["default"] == "full"
    assert made["description"]["default"] == ""


async def test_the_documented_page_size_default_is_what_a_listing_returns(tmp_path: Path) -> None:
    async with aql_session(records_settings(tmp_path, aql={"default_page_size": 3})) as aql:
        documented = (await _parameters(aql, "mcp_aql_read", "list_collections"))["first"]["default"]
        for name in "abcde":
            await aql.call("mcp_aql_create", "create_collection", collection=name)
        listed = await aql.call("mcp_aql_read", "list_collections")
    assert len(listed["data"]["items"]) == documented == 3


async def test_the_documented_page_size_cap_clamps_a_larger_page_instead_of_refusing_it(tmp_path: Path) -> None:
    """MCP-AQL pagination §5.3-§5.4: over the cap is clamped; `_protocol.limits` states the cap."""
    async with aql_session(records_settings(tmp_path, aql={"max_page_size": 2})) as aql:
        listing = await aql.call("mcp_aql_read", "introspect", query="operations")
        for name in "abc":
            await aql.call("mcp_aql_create", "create_collection", collection=name)
        forward = await aql.call("mcp_aql_read", "list_collections", first=50)
        backward = await aql.call("mcp_aql_read", "list_collections", last=50)
    assert listing["data"]["_protocol"]["limits"]["max_page_size"] == 2
    assert len(forward["data"]["items"]) == len(backward["data"]["items"]) == 2
    assert forward["data"]["pageInfo"]["hasNextPage"] is True


async def test_confirmation_token_is_documented_only_where_the_gatekeeper_can_ask_for_it(tmp_path: Path) -> None:
    async with aql_session(records_settings(tmp_path)) as aql:
        found = await aql.call("mcp_aql_read", "introspect", query="operations")
        documented = {
            op["name"]: "confirmation_token" in await _parameters(aql, "mcp_aql_read", op["name"])
            for op in found["data"]["operations"]
        }
    assert [name for name, has in documented.items() if has] == ["delete_collection"]


@pytest.mark.parametrize(
    ("aql_settings", "families"),
    [
        (
            {},
            {
                "create": "mcp_aql_create",
                "read": "mcp_aql_read",
                "update": "mcp_aql_update",
                "delete": "mcp_aql_delete",
            },
        ),
        (
            {"mode": "all"},
            {
                "create": "mcp_aql_create",
                "read": "mcp_aql_read",
                "update": "mcp_aql_update",
                "delete": "mcp_aql_delete",
            },
        ),
        ({"mode": "single"}, {"create": "mcp_aql", "read": "mcp_aql", "update": "mcp_aql", "delete": "mcp_aql"}),
        ({"profile": "dqmo"}, {"discover": "mcp_aql_discover", "query": "mcp_aql_query", "manage": "mcp_aql_manage"}),
    ],
)
async def test_protocol_families_name_only_registered_tools(
    tmp_path: Path, aql_settings: dict[str, str], families: dict[str, str]
) -> None:
    """The records plugin has no EXECUTE operation: no `execute`/`operate` family, whose tool does not exist."""
    async with aql_session(records_settings(tmp_path, aql=aql_settings)) as aql:
        tool = "mcp_aql" if aql_settings.get("mode") == "single" else None
        tools = {t["name"] for t in await aql.tools()}
        found = await aql.call(
            tool or ("mcp_aql_discover" if aql_settings.get("profile") else "mcp_aql_read"),
            "introspect",
            query="operations",
        )
    protocol = found["data"]["_protocol"]["families"]
    assert {family: entry["tool"] for family, entry in protocol.items()} == families
    assert set(families.values()) <= tools
