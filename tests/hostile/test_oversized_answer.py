"""An oversized MRTR answer half-ran a batch (issue 27, N7): a 600 KB answer to the confirmation of a
batch's first delete deleted it, then the next question's `requestState` could not carry the answer
and the caller got -32603 "needs more state than a retry can carry", with one item done and no way
to finish the rest.

What must hold against a real `aql-mcp serve` (2026-07-28 basic/patterns/mrtr, "Error Handling";
docs/eras.md, "Asking the client"): an answer over the bound is 400 -32602 naming
`inputResponses.<key>` before the handler runs, and nothing of the batch ran.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.support.modern import MODERN, modern_body, modern_error, modern_headers
from tests.support.server import ServerProcess, start_server

META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientInfo": {"name": "hostile-mrtr", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
}
BATCH = {
    "operations": [
        {"operation": "delete_collection", "params": {"collection": "first"}},
        {"operation": "delete_collection", "params": {"collection": "second"}},
    ]
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    env = {"AQL_MCP_MCP__MODERN_ERA": "true", "AQL_MCP_AQL__CONFIRM_WITH_ELICITATION": "true"}
    with start_server(tmp_path_factory.mktemp("mrtr"), env=env, plugins=()) as process:
        yield process


def call(server: ServerProcess, token: str, name: str, arguments: dict[str, Any], **extra: Any) -> httpx.Response:
    body = modern_body("tools/call", {"name": name, "arguments": arguments, **extra}, META, 41)
    return httpx.post(
        server.url, json=body, headers=modern_headers(token, "tools/call", name, arguments=arguments), timeout=20
    )


def collections(server: ServerProcess, token: str) -> set[str]:
    listed = call(server, token, "mcp_aql_read", {"operation": "list_collections", "params": {}})
    return {item["name"] for item in listed.json()["result"]["structuredContent"]["data"]["items"]}


def test_an_oversized_answer_is_refused_naming_its_key_and_the_batch_runs_nothing(server: ServerProcess) -> None:
    token = server.token(subject="mrtr-attacker")
    for name in ("first", "second"):
        create = {"operation": "create_collection", "params": {"collection": name}}
        assert call(server, token, "mcp_aql_create", create).status_code == 200
    asked = call(server, token, "mcp_aql_delete", BATCH).json()["result"]
    assert asked["resultType"] == "input_required"
    ((key, _),) = asked["inputRequests"].items()
    # A valid acceptance, padded to 600 KB: under the 1 MiB body limit, over what a state carries.
    answer = {"action": "accept", "content": {"confirm": True, "note": "x" * 600_000}}
    retry = call(
        server, token, "mcp_aql_delete", BATCH, inputResponses={key: answer}, requestState=asked["requestState"]
    )
    error = modern_error(retry, 400, -32602, 41)
    assert error["data"]["field"] == f"inputResponses.{key}"
    assert error["data"]["reason"] == "too_large"
    assert error["data"]["maxBytes"] < 600_000
    assert collections(server, token) >= {"first", "second"}


def test_an_answer_within_the_bound_still_confirms_the_batch_item(server: ServerProcess) -> None:
    token = server.token(subject="mrtr-honest")
    create = {"operation": "create_collection", "params": {"collection": "first"}}
    assert call(server, token, "mcp_aql_create", create).status_code == 200
    single = {"operations": BATCH["operations"][:1]}
    asked = call(server, token, "mcp_aql_delete", single).json()["result"]
    ((key, _),) = asked["inputRequests"].items()
    answer = {"action": "accept", "content": {"confirm": True, "note": "x" * 1000}}
    done = call(
        server, token, "mcp_aql_delete", single, inputResponses={key: answer}, requestState=asked["requestState"]
    )
    assert done.json()["result"]["structuredContent"]["results"][0]["result"]["success"] is True
    assert "first" not in collections(server, token)
