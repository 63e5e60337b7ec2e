"""What MCP-AQL introspection and errors promise, checked against a real `aql-mcp serve` (issue 12;
the MCP-AQL conformance runner's Introspection Fidelity, Parameter Handling and Error Quality checks
are MUSTs): enum and pattern errors say what is allowed, per-operation defaults are documented and
are what the operation does, `list_collections` pages, batch items keep their warnings, and
`_protocol.families` names only tools that exist."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.aql import Session, session
from tests.support.server import ServerProcess, start_server

HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    # The records plugin alone among the built-ins: it has no EXECUTE operation (the safety plugin has).
    env = {
        "AQL_MCP_AQL__DEFAULT_PAGE_SIZE": "3",
        "AQL_MCP_SERVER__BUILTIN_PLUGINS": '["aql_mcp.plugins.records:plugin", "aql_mcp.plugins.corporate:plugin"]',
    }
    with start_server(tmp_path_factory.mktemp("fidelity"), env=env, plugins=()) as server:
        yield server


@pytest.fixture
def caller(served: ServerProcess) -> Iterator[Session]:
    with session(served, subject="fidelity") as opened:
        yield opened


def _parameters(caller: Session, operation: str) -> dict[str, dict[str, Any]]:
    return {info["name"]: info for info in caller.details(operation)["parameters"]}


def test_an_enum_error_lists_the_allowed_values(caller: Session) -> None:
    caller.call("mcp_aql_create", "create_collection", collection="enums")
    refused = caller.call("mcp_aql_read", "list_records", collection="enums", sort={"field": "a", "order": "up"})

    assert refused["error"]["code"] == "VALIDATION_INVALID_TYPE"
    assert refused["error"]["details"]["param_name"] == "sort.order"
    assert refused["error"]["details"]["allowed_values"] == ["asc", "desc"]


def test_a_pattern_error_names_the_pattern(caller: Session) -> None:
    refused = caller.call("mcp_aql_create", "create_collection", collection="Not A Name")

    assert refused["error"]["code"] == "VALIDATION_INVALID_TYPE"
    assert refused["error"]["details"]["pattern"] in refused["error"]["message"]


def test_the_documented_page_size_default_is_what_list_collections_returns_and_it_pages(caller: Session) -> None:
    documented = _parameters(caller, "list_collections")["first"]["default"]
    for name in ("pa", "pb", "pc", "pd", "pe"):
        assert caller.call("mcp_aql_create", "create_collection", collection=name)["success"]

    names: list[str] = []
    page = caller.call("mcp_aql_read", "list_collections")
    sizes = [len(page["data"]["items"])]
    names += [item["name"] for item in page["data"]["items"]]
    while page["data"]["pageInfo"]["hasNextPage"]:
        after = page["data"]["pageInfo"]["endCursor"]
        page = caller.call("mcp_aql_read", "list_collections", first=3, after=after)
        sizes.append(len(page["data"]["items"]))
        names += [item["name"] for item in page["data"]["items"]]

    assert documented == 3
    assert sizes[0] == 3
    assert names == sorted(names)
    assert len(names) == len(set(names)) == page["data"]["pageInfo"]["totalCount"]
    assert {"pa", "pb", "pc", "pd", "pe"} <= set(names)


def test_a_forged_collection_cursor_is_a_validation_error_naming_the_parameter(caller: Session) -> None:
    refused = caller.call("mcp_aql_read", "list_collections", first=3, after="bm90IGEgY3Vyc29y")

    assert refused["error"]["code"] == "VALIDATION_INVALID_TYPE"
    assert refused["error"]["details"]["param_name"] == "after"


def test_a_batch_item_keeps_its_warnings(caller: Session) -> None:
    caller.call("mcp_aql_create", "create_collection", collection="replays")
    item = {"operation": "create_record", "params": {"collection": "replays", "data": {"a": 1}, "idempotency_key": "k"}}

    # Not checked against the batch schema: its copy of the result shape leaves `warnings` out, while
    # operation-result.schema.json has them (docs/aql.md).
    batch = caller.tool("mcp_aql_create", {"operations": [item, item]})["structuredContent"]

    first, replay = (entry["result"] for entry in batch["results"])
    assert "warnings" not in first
    assert [warning["code"] for warning in replay["warnings"]] == ["IDEMPOTENT_REPLAY"]


def test_protocol_families_name_only_tools_that_are_listed(served: ServerProcess, caller: Session) -> None:
    found = caller.call("mcp_aql_read", "introspect", query="operations")
    families = found["data"]["_protocol"]["families"]
    listed = caller.http.post(
        "/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers=caller.headers
    ).json()["result"]["tools"]

    assert {entry["tool"] for entry in families.values()} <= {tool["name"] for tool in listed}
    assert "execute" not in families  # the records plugin has no EXECUTE operation, so no mcp_aql_execute


def test_in_single_mode_every_family_names_the_single_tool(tmp_path: Path) -> None:
    with start_server(tmp_path, env={"AQL_MCP_AQL__MODE": "single"}, plugins=()) as server, session(server) as caller:
        found = caller.call("mcp_aql", "introspect", query="operations")
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        tools = httpx.post(server.url, json=listing, headers=caller.headers).json()["result"]["tools"]

    assert {entry["tool"] for entry in found["data"]["_protocol"]["families"].values()} == {"mcp_aql"}
    assert [tool["name"] for tool in tools if tool["name"].startswith("mcp_aql")] == ["mcp_aql"]
