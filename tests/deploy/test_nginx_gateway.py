"""The gateway of docs/gateway.md: Debian's nginx (scripts/nginx.sh) runs the site example
deploy/nginx/aql-mcp.conf and the per-operation policy files of deploy/nginx/ unchanged, in front of
a real `aql-mcp serve` (issue 23, "Per-operation gateway policy", "Per-operation visibility and cost
for gateways").

nginx keeps its default proxy buffering and gets a short `proxy_read_timeout`, so a call that streams
longer than that proves the service's keep-alive comments reach it and pass unbuffered."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.support.modern import MODERN, modern_body, modern_headers
from tests.support.nginx import ROOT, Gateway, running_gateway, site_with_read_timeout
from tests.support.server import CONFORMANCE, ServerProcess, start_server
from tests.support.sse import answer

POLICY = ROOT / "deploy" / "nginx" / "operation-policy.conf"
CHECK = ROOT / "deploy" / "nginx" / "operation-policy-check.conf"
STRICT = ROOT / "deploy" / "nginx" / "operation-policy-strict.conf"
HELD = "tests.support.held:plugin"
READ_TIMEOUT_SECONDS = 2
BURST = 12
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientInfo": {"name": "gateway-test", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    env = {
        # Keep-alive comments well inside the gateway's read timeout below.
        "AQL_MCP_STREAMS__KEEPALIVE_SECONDS": "0.5",
        # A budget small enough for one batch to exhaust it; each test calls as a subject of its own,
        # and nothing refills during the module.
        "AQL_MCP_LIMITS__RATE_PER_SECOND": "0.01",
        "AQL_MCP_LIMITS__RATE_BURST": str(BURST),
    }
    with start_server(tmp_path_factory.mktemp("gateway-upstream"), env=env, plugins=(CONFORMANCE, HELD)) as process:
        yield process


def policy_gateway(directory: Path, server: ServerProcess, *extra: Path) -> Any:
    """nginx with the policy: part 1 in the http block, part 2 (and `extra`) before the site file,
    which is the example with a short `proxy_read_timeout`."""
    return running_gateway(
        directory,
        [server.port],
        site=site_with_read_timeout(directory / "site", READ_TIMEOUT_SECONDS),
        http_extra=f"    include {POLICY};",
        server_extra="\n".join(f"        include {path};" for path in (CHECK, *extra)),
    )


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, server: ServerProcess) -> Iterator[Gateway]:
    with policy_gateway(tmp_path_factory.mktemp("nginx-policy"), server) as running:
        yield running


@pytest.fixture(scope="module")
def strict(tmp_path_factory: pytest.TempPathFactory, server: ServerProcess) -> Iterator[Gateway]:
    with policy_gateway(tmp_path_factory.mktemp("nginx-strict"), server, STRICT) as running:
        yield running


def post(
    gateway: Gateway, token: str, tool: str, arguments: dict[str, Any], operation: str | None = None
) -> httpx.Response:
    """A modern `tools/call` through the gateway; `operation` overrides the mirrored header."""
    headers = modern_headers(token, "tools/call", tool, arguments=arguments)
    if operation is not None:
        headers["mcp-param-operation"] = operation
    body = modern_body("tools/call", {"name": tool, "arguments": arguments}, META, 7)
    return httpx.post(gateway.url, json=body, headers=headers, timeout=30)


def envelope(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    result: dict[str, Any] = answer(response)["result"]["structuredContent"]
    return result


def collections(gateway: Gateway, token: str) -> set[str]:
    listed = envelope(post(gateway, token, "mcp_aql_read", {"operation": "list_collections", "params": {}}))
    return {item["name"] for item in listed["data"]["items"]}


def logged(gateway: Gateway, operation: str) -> list[str]:
    """The access log lines of calls that named `operation` in their header (at least one)."""
    return [line for line in gateway.logged(f"op={operation}") if line.endswith(f"op={operation}")]


def official_client_calls(gateway: Gateway, token: str, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    """The official Python client (mcp 2.3.0) through the gateway: each call's result, or its error."""

    async def run() -> list[Any]:
        outcomes: list[Any] = []
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http,
            Client(streamable_http_client(gateway.url, http_client=http)) as client,
        ):
            for tool, arguments in calls:
                try:
                    outcomes.append(await client.call_tool(tool, arguments))
                except Exception as error:  # the refusal, whatever the SDK raises for it
                    outcomes.append(error)
        return outcomes

    return asyncio.run(run())


def test_the_gateway_refuses_delete_collection_by_header_and_passes_other_operations(
    gateway: Gateway, server: ServerProcess
) -> None:
    token = server.token(subject="policy")
    create = {"operation": "create_collection", "params": {"collection": "kept"}}
    delete = {"operation": "delete_collection", "params": {"collection": "kept"}}
    created, refused = official_client_calls(gateway, token, [("mcp_aql_create", create), ("mcp_aql_delete", delete)])

    assert json.loads(created.content[0].text)["success"] is True
    assert isinstance(refused, Exception)
    assert "kept" in collections(gateway, token)
    # The official client mirrored the operation on the wire: the gateway logged it, passed the
    # create to the replica and answered the delete itself.
    assert any(f"upstream=127.0.0.1:{server.port}" in line for line in logged(gateway, "create_collection"))
    denied = logged(gateway, "delete_collection")
    assert denied
    assert all(" 403 upstream=- " in line for line in denied)


def test_the_refusal_is_a_json_rpc_error_naming_the_operation(gateway: Gateway, server: ServerProcess) -> None:
    token = server.token(subject="refusal")
    response = post(gateway, token, "mcp_aql_delete", {"operation": "delete_collection", "params": {"collection": "x"}})
    assert response.status_code == 403
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert body["id"] is None
    assert body["error"]["data"] == {"reason": "gateway_policy", "operation": "delete_collection"}


def test_a_header_naming_an_allowed_operation_over_a_delete_in_the_body_is_refused_by_the_service(
    gateway: Gateway, server: ServerProcess
) -> None:
    """The gateway passes what the header names; the service compares it with the body (-32020)."""
    token = server.token(subject="smuggler")
    assert envelope(
        post(gateway, token, "mcp_aql_create", {"operation": "create_collection", "params": {"collection": "target"}})
    )["success"]
    arguments = {"operation": "delete_collection", "params": {"collection": "target"}}
    response = post(gateway, token, "mcp_aql_delete", arguments, operation="list_collections")

    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == -32020
    assert response.json()["error"]["data"]["header"] == "Mcp-Param-Operation"
    assert any(f"400 upstream=127.0.0.1:{server.port}" in line for line in logged(gateway, "list_collections"))
    assert "target" in collections(gateway, token)


def test_an_encoded_header_is_refused_by_the_gateway_which_cannot_read_it(
    gateway: Gateway, server: ServerProcess
) -> None:
    """The service would decode `=?base64?...?=` and find `delete_collection` agreeing with the body."""
    token = server.token(subject="encoder")
    assert envelope(
        post(gateway, token, "mcp_aql_create", {"operation": "create_collection", "params": {"collection": "hidden"}})
    )["success"]
    encoded = "=?base64?" + base64.b64encode(b"delete_collection").decode() + "?="
    arguments = {"operation": "delete_collection", "params": {"collection": "hidden"}}
    response = post(gateway, token, "mcp_aql_delete", arguments, operation=encoded)

    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32020
    assert all("upstream=-" in line for line in logged(gateway, encoded))
    assert "hidden" in collections(gateway, token)


def test_a_batch_past_the_budget_is_429_through_the_gateway_and_stores_nothing(
    gateway: Gateway, server: ServerProcess
) -> None:
    token = server.token(subject="batcher")
    assert envelope(
        post(gateway, token, "mcp_aql_create", {"operation": "create_collection", "params": {"collection": "notes"}})
    )["success"]
    creates = [
        {"operation": "create_record", "params": {"collection": "notes", "data": {"i": index}}}
        for index in range(BURST)
    ]
    response = post(gateway, token, "mcp_aql_create", {"operations": creates})

    assert response.status_code == 429, response.text
    error = response.json()["error"]
    assert error["code"] == -32003
    assert error["data"]["budget"] == "rate"
    assert error["data"]["cost"] == BURST
    assert response.headers["retry-after"] == str(error["data"]["retryAfter"])
    # A batch carries no operation header: the permissive gateway passed it to the service.
    assert any(line.endswith("op=-") for line in gateway.logged(" 429 upstream=127.0.0.1:"))
    listed = envelope(
        post(gateway, token, "mcp_aql_read", {"operation": "list_records", "params": {"collection": "notes"}})
    )
    assert listed["data"]["items"] == []


def held_call(gateway: Gateway, server: ServerProcess, release: Path) -> tuple[int, dict[str, Any] | None]:
    """`test_held` through the gateway: the first progress event is read while the tool is still
    held (nginx passed it on before the call could finish), then the tool stays silent for longer
    than the read timeout before the test releases it. The keep-alive comments read and the
    result, or None when the gateway cut the stream."""
    params = {"name": "test_held", "arguments": {"release": str(release)}}
    body = modern_body("tools/call", params, {**META, "progressToken": "held"}, 9)
    headers = modern_headers(server.token(subject="held"), "tools/call", "test_held")
    comments = 0
    with (
        httpx.Client(timeout=httpx.Timeout(30, read=10)) as http,
        http.stream("POST", gateway.url, json=body, headers=headers) as response,
    ):
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = response.iter_lines()
        first = next(line for line in lines if line.startswith("data:"))
        assert json.loads(first[5:])["params"]["message"] == "held"
        assert not release.exists()
        silent_until = time.monotonic() + READ_TIMEOUT_SECONDS + 1.5
        try:
            for line in lines:
                comments += line.startswith(":")
                if time.monotonic() > silent_until and not release.exists():
                    release.touch()
                if line.startswith("data:") and "result" in json.loads(line[5:]):
                    result: dict[str, Any] = json.loads(line[5:])["result"]
                    return comments, result
        except httpx.RemoteProtocolError:
            pass  # nginx closed the stream in the middle of its chunked body
    return comments, None


def test_a_held_call_outlives_the_read_timeout_and_its_progress_arrives_while_it_runs(
    gateway: Gateway, server: ServerProcess, tmp_path: Path
) -> None:
    """nginx's default buffering, a 2 s `proxy_read_timeout`: only keep-alive comments flow while
    the tool is held for longer than that, and the result still arrives once it is released."""
    comments, result = held_call(gateway, server, tmp_path / "release")
    assert result is not None
    assert result["content"][0]["text"] == "released"
    assert comments >= READ_TIMEOUT_SECONDS  # at 0.5 s, several kept the silent stream alive


def test_without_keep_alives_inside_the_read_timeout_nginx_cuts_the_held_call(tmp_path: Path) -> None:
    """The control for the test above: the same gateway and call, with the service's keep-alive
    interval above the read timeout, is cut by nginx."""
    env = {"AQL_MCP_STREAMS__KEEPALIVE_SECONDS": "30"}
    (tmp_path / "server").mkdir()
    with (
        start_server(tmp_path / "server", env=env, plugins=(CONFORMANCE, HELD)) as quiet,
        policy_gateway(tmp_path / "nginx", quiet) as gateway,
    ):
        comments, result = held_call(gateway, quiet, tmp_path / "release")
        assert "upstream timed out" in gateway.error_log.read_text(encoding="utf-8")
    assert result is None
    assert comments == 0


def test_the_strict_policy_admits_single_modern_calls_only(strict: Gateway, server: ServerProcess) -> None:
    token = server.token(subject="strict")
    single = post(strict, token, "mcp_aql_read", {"operation": "list_collections", "params": {}})
    batch = post(strict, token, "mcp_aql_read", {"operations": [{"operation": "list_collections", "params": {}}]})
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "old", "version": "1"}},
    }
    legacy = httpx.post(
        strict.url,
        json=initialize,
        headers={"authorization": f"Bearer {token}", "accept": "application/json, text/event-stream"},
        timeout=30,
    )

    assert envelope(single)["success"] is True
    assert batch.status_code == 403
    assert batch.json()["error"]["data"]["reason"] == "gateway_policy"
    assert legacy.status_code == 400
    assert legacy.json()["error"]["data"]["supported"] == [MODERN]
    assert len(strict.logged("upstream=127.0.0.1:")) == 1


def test_the_discovery_documents_pass_the_gateway(gateway: Gateway) -> None:
    """A client that got 401 fetches the protected-resource metadata through the same gateway."""
    response = httpx.get(f"{gateway.base}/.well-known/oauth-protected-resource", timeout=30)
    assert response.status_code == 200, response.text
    assert response.json()["resource"].endswith("/mcp")
