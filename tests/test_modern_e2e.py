"""The modern era against a real `aql-mcp serve --dev` with `mcp.modern_era` on (docs/eras.md).

One process serves both eras on `/mcp`: modern requests without a session, and a legacy client's
`initialize` beside them. The official `mcp` client in `auto` mode must end up modern: both SDK
clients silently fall back to `initialize` on a broken `server/discover`, so the era is asserted
from the wire (no `Mcp-Session-Id` ever, no `initialize` sent), not from success alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import orjson
import pytest
from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.support.asgi import CONFORMANCE, MCP_HEADERS, initialize_params, rpc
from tests.support.modern import MODERN, modern_body, modern_error, modern_headers
from tests.support.replicas import SLOW
from tests.support.server import ServerProcess, start_server
from tests.support.wait import until

pytestmark = pytest.mark.anyio

DEADLINE = 20.0
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientInfo": {"name": "modern-e2e", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


@pytest.fixture(scope="module")
def modern_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    env = {"AQL_MCP_MCP__MODERN_ERA": "true", "AQL_MCP_AQL__CONFIRM_WITH_ELICITATION": "true"}
    with start_server(tmp_path_factory.mktemp("modern"), env=env) as process:
        yield process


def post(
    server: ServerProcess,
    method: str,
    params: dict[str, Any] | None = None,
    *,
    name: str | None = None,
    meta: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
    message_id: int | str = 9,
) -> httpx.Response:
    sent = {
        **modern_headers(server.token(), method, name, arguments=(params or {}).get("arguments")),
        **(headers or {}),
    }
    body = modern_body(method, params, META if meta is None else meta, message_id)
    return httpx.post(server.url, json=body, headers=sent, timeout=DEADLINE)


def assert_error(response: httpx.Response, status: int, code: int, message_id: int | str = 9) -> dict[str, Any]:
    return modern_error(response, status, code, message_id)


def test_server_discover_answers_without_a_session(modern_server: ServerProcess) -> None:
    """MCP 2026-07-28 server/discover: servers MUST implement it."""
    response = post(modern_server, "server/discover")

    assert response.status_code == 200, response.text
    result = response.json()["result"]
    assert MODERN in result["supportedVersions"]
    assert result["resultType"] == "complete"
    assert "mcp-session-id" not in response.headers


def test_an_mcp_aql_operation_is_called_in_the_modern_era(modern_server: ServerProcess) -> None:
    arguments = {"operation": "introspect", "params": {"query": "operations"}}
    response = post(modern_server, "tools/call", {"name": "mcp_aql_read", "arguments": arguments}, name="mcp_aql_read")

    assert response.status_code == 200, response.text
    result = response.json()["result"]
    assert result["resultType"] == "complete"
    assert result.get("isError") is not True
    assert result["content"]


def test_errors_come_in_the_order_the_spec_gives_with_the_request_id(modern_server: ServerProcess) -> None:
    """-32602 (meta), then -32020 (headers), then -32022 (version), then 404 -32601 (method)."""
    future = {**META, "io.modelcontextprotocol/protocolVersion": "2099-01-01"}
    everything_wrong = post(
        modern_server, "no/such", meta={}, headers={"mcp-method": "other", "mcp-protocol-version": "2099-01-01"}
    )
    assert_error(everything_wrong, 400, -32602)
    headers_wrong = post(
        modern_server, "no/such", meta=future, headers={"mcp-method": "other", "mcp-protocol-version": "2099-01-01"}
    )
    assert_error(headers_wrong, 400, -32020)
    version_wrong = post(modern_server, "no/such", meta=future, headers={"mcp-protocol-version": "2099-01-01"})
    error = assert_error(version_wrong, 400, -32022)
    assert MODERN in error["data"]["supported"]
    assert_error(post(modern_server, "no/such", message_id="last"), 404, -32601, "last")


def test_a_name_header_not_matching_the_body_is_header_mismatch(modern_server: ServerProcess) -> None:
    """MCP 2026-07-28 Streamable HTTP, "Server Validation": a load balancer may route on the header."""
    response = post(modern_server, "tools/call", {"name": "mcp_aql_delete", "arguments": {}}, name="mcp_aql_read")
    assert_error(response, 400, -32020)


@pytest.mark.parametrize("method", ["GET", "DELETE"])
def test_get_and_delete_are_405_in_the_modern_era(modern_server: ServerProcess, method: str) -> None:
    headers = {"authorization": f"Bearer {modern_server.token()}", "mcp-protocol-version": MODERN}
    response = httpx.request(method, modern_server.url, headers={**headers, "accept": "text/event-stream"})
    assert response.status_code == 405


def test_legacy_initialize_works_on_the_same_process(modern_server: ServerProcess) -> None:
    headers = {**MCP_HEADERS, "authorization": f"Bearer {modern_server.token()}"}
    response = httpx.post(modern_server.url, json=rpc("initialize", initialize_params()), headers=headers)
    assert response.status_code == 200
    assert response.json()["result"]["protocolVersion"] == "2025-11-25"
    assert response.headers["mcp-session-id"]


def test_with_the_setting_off_a_modern_request_still_gets_400_invalid_request(tmp_path: Path) -> None:
    """Turned off, the answer a dual-era client reads as "legacy server, fall back"."""
    with start_server(tmp_path, env={"AQL_MCP_MCP__MODERN_ERA": "false"}) as server:
        response = post(server, "server/discover")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32600


class Wire:
    """What the SDK client sent and got: the methods and any session id."""

    def __init__(self) -> None:
        self.methods: list[str] = []
        self.session_ids: list[str] = []

    async def request(self, request: httpx2.Request) -> None:
        body = orjson.loads(request.content) if request.content else {}
        self.methods.append(body.get("method", request.method) if isinstance(body, dict) else "batch")

    async def response(self, response: httpx2.Response) -> None:
        if "mcp-session-id" in response.headers:
            self.session_ids.append(response.headers["mcp-session-id"])


@pytest.mark.parametrize("mode", ["auto", MODERN])
async def test_the_official_client_ends_up_modern_and_lists_and_calls_tools(
    modern_server: ServerProcess, mode: str
) -> None:
    wire = Wire()
    http = create_mcp_http_client(headers={"authorization": f"Bearer {modern_server.token()}"})
    http.event_hooks["request"].append(wire.request)
    http.event_hooks["response"].append(wire.response)
    with anyio.fail_after(DEADLINE):
        async with http, Client(streamable_http_client(modern_server.url, http_client=http), mode=mode) as client:
            tools = await client.list_tools()
            result = await client.call_tool(
                "mcp_aql_read", {"operation": "introspect", "params": {"query": "operations"}}
            )
            assert client.protocol_version == MODERN

    assert "mcp_aql_read" in {tool.name for tool in tools.tools}
    assert isinstance(result, types.CallToolResult)
    assert not result.is_error
    assert "initialize" not in wire.methods
    assert "tools/call" in wire.methods
    assert wire.session_ids == []


@pytest.mark.parametrize(("mode", "version"), [("auto", MODERN), (MODERN, MODERN), ("legacy", "2025-11-25")])
async def test_a_smoke_run_of_the_official_client_in_each_mode_confirms_an_operation_by_elicitation(
    modern_server: ServerProcess, mode: str, version: str
) -> None:
    """Tools, resources, prompts and a dangerous MCP-AQL operation confirmed through the client's
    elicitation callback: a server-to-client request in the legacy era, an `input_required` round
    (MRTR) in the modern one. The era is asserted from the wire, not from success."""
    wire = Wire()
    asked: list[types.ElicitRequestParams] = []

    async def confirm(_context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"confirm": True})

    collection = f"smoke-{mode.replace('-', '')}"
    http = create_mcp_http_client(headers={"authorization": f"Bearer {modern_server.token()}"})
    http.event_hooks["request"].append(wire.request)
    http.event_hooks["response"].append(wire.response)
    transport = streamable_http_client(modern_server.url, http_client=http)
    with anyio.fail_after(DEADLINE):
        async with http, Client(transport, mode=mode, elicitation_callback=confirm) as client:
            tools = await client.list_tools()
            simple = await client.call_tool("test_simple_text", {})
            resources = await client.list_resources()
            read = await client.read_resource("test://static-text")
            prompt = await client.get_prompt("test_simple_prompt", {})
            create = {"operation": "create_collection", "params": {"collection": collection}}
            await client.call_tool("mcp_aql_create", create)
            delete = {"operation": "delete_collection", "params": {"collection": collection}}
            deleted = await client.call_tool("mcp_aql_delete", delete)
            assert client.protocol_version == version

    assert {"test_simple_text", "mcp_aql_delete"} <= {tool.name for tool in tools.tools}
    assert not simple.is_error
    assert "test://static-text" in {str(resource.uri) for resource in resources.resources}
    assert read.contents
    assert prompt.messages
    assert not deleted.is_error, deleted
    assert deleted.structured_content is not None
    assert deleted.structured_content["data"]["deleted"] is True
    [question] = asked
    assert "delete_collection" in question.message
    if version == MODERN:
        assert "initialize" not in wire.methods
        assert wire.session_ids == []
        # The confirmation was a retry of the same call, not a request on a stream.
        assert wire.methods.count("tools/call") == 4
    else:
        assert "initialize" in wire.methods
        assert wire.session_ids


def test_closing_the_connection_cancels_a_modern_request(tmp_path: Path) -> None:
    """2026-07-28 basic/patterns/cancellation: a client cancels a request by closing its HTTP
    request; the server stops the work (the slow tool logs that it was stopped)."""
    env = {"AQL_MCP_MCP__MODERN_ERA": "true"}
    with start_server(tmp_path, env=env, plugins=(CONFORMANCE, SLOW)) as server:
        params = {"name": "test_slow", "arguments": {"steps": 300}, "_meta": {**META, "progressToken": "p"}}
        body = rpc("tools/call", params, 5)
        headers = modern_headers(server.token(), "tools/call", "test_slow")
        with (
            httpx.Client(timeout=DEADLINE) as http,
            http.stream("POST", server.url, json=body, headers=headers) as response,
        ):
            assert response.headers["content-type"].startswith("text/event-stream")
            next(response.iter_lines())  # the first progress event: the handler is running
        until(lambda: "slow_tool_stopped" in server.log_text(), "the handler was never stopped")
        log = server.log_text()
        metrics = httpx.get(f"http://127.0.0.1:{server.port}/metrics", timeout=DEADLINE).text
    assert '"request_cancelled"' in log
    assert "Traceback" not in log
    # A client going away is not a failure of the service: its own outcome, not `internal`.
    calls = [line for line in metrics.splitlines() if line.startswith("aql_mcp_calls_total{") and "test_slow" in line]
    assert any('outcome="cancelled"' in line for line in calls), calls
