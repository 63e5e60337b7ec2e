"""Attacks on the mirrored headers of MCP 2026-07-28 (`Mcp-Method`, `Mcp-Name`, `MCP-Protocol-Version`).

A gateway in front of the replicas may route, rate-limit or authorise on the headers alone; a
caller who sends a harmless name in the header and a dangerous one in the body must be refused
before anything runs (2026-07-28 Streamable HTTP, "Server Validation"), and nothing internal leaks.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.support.asgi import MCP_HEADERS, rpc
from tests.support.server import ServerProcess, start_server

MODERN = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
LEAKS = ("traceback", "/tmp/", "site-packages", ".py", "sqlite", "select ")


@pytest.fixture(scope="module")
def modern_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with start_server(tmp_path_factory.mktemp("modern"), env={"AQL_MCP_MCP__MODERN_ERA": "true"}) as process:
        yield process


def send(server: ServerProcess, body: dict[str, Any], **headers: str) -> httpx.Response:
    sent = {**MCP_HEADERS, "authorization": f"Bearer {server.token()}", "mcp-protocol-version": MODERN, **headers}
    return httpx.post(server.url, json=body, headers=sent, timeout=20.0)


def assert_mismatch(response: httpx.Response, token: str) -> None:
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == -32020
    assert response.json()["id"] == 5
    lowered = response.text.lower()
    assert not any(leak in lowered for leak in LEAKS)
    assert token not in response.text


def test_a_harmless_tool_in_the_header_does_not_smuggle_a_delete_in_the_body(modern_server: ServerProcess) -> None:
    arguments = {"operation": "delete_record", "params": {"collection": "c", "id": "x"}}
    body = rpc("tools/call", {"name": "mcp_aql_delete", "arguments": arguments, "_meta": META}, 5)
    response = send(modern_server, body, **{"mcp-method": "tools/call", "mcp-name": "mcp_aql_read"})
    assert_mismatch(response, modern_server.token())


def test_a_list_method_in_the_header_does_not_cover_a_call_in_the_body(modern_server: ServerProcess) -> None:
    body = rpc("tools/call", {"name": "mcp_aql_delete", "arguments": {}, "_meta": META}, 5)
    response = send(modern_server, body, **{"mcp-method": "tools/list", "mcp-name": "mcp_aql_delete"})
    assert_mismatch(response, modern_server.token())


@pytest.mark.parametrize("name", ["=?base64?!!!?=", "=?base64?/w==?=", "=?base64?bWNwX2FxbF9yZWFk?="])
def test_a_bad_or_different_base64_name_is_refused(modern_server: ServerProcess, name: str) -> None:
    """Undecodable, not UTF-8, or decoding to another tool ("mcp_aql_read"): all -32020."""
    body = rpc("tools/call", {"name": "mcp_aql_delete", "arguments": {}, "_meta": META}, 5)
    response = send(modern_server, body, **{"mcp-method": "tools/call", "mcp-name": name})
    assert_mismatch(response, modern_server.token())


def test_a_version_header_claiming_legacy_over_a_modern_meta_is_a_header_mismatch(modern_server: ServerProcess) -> None:
    """The body's `_meta` names 2026-07-28, so the request is modern (docs/eras.md, "How the era
    of a request is decided"); its header disagrees with the body it mirrors: 400 -32020, nothing runs."""
    body = rpc("tools/call", {"name": "mcp_aql_delete", "arguments": {}, "_meta": META}, 5)
    response = send(modern_server, body, **{"mcp-protocol-version": "2025-11-25", "mcp-method": "tools/call"})
    assert_mismatch(response, modern_server.token())
