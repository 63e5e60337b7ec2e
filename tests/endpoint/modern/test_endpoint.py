"""The modern edge in-process (`endpoint/modern/endpoint.py`): MCP 2026-07-28 requests beside the legacy era.

Each rejection is checked for its HTTP status, JSON-RPC code and the request's own id echoed;
the order of the checks is the one the spec gives: -32602, -32020, -32022, then 404 -32601.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from aql_mcp.auth.dev_issuer import DevIssuer
from aql_mcp.protocol.param_headers import decode_header_value
from aql_mcp.settings import Settings
from tests.support.asgi import MCP_HEADERS, asgi_client, dev_settings, initialize_params, rpc
from tests.support.modern import MODERN, modern_body, modern_headers
from tests.support.modern import modern_error as error_of

pytestmark = pytest.mark.anyio

META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientInfo": {"name": "modern-tests", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return dev_settings(tmp_path, mcp={"modern_era": True})


@pytest.fixture
async def client(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(settings) as http:
        yield http


@pytest.fixture
def token(settings: Settings) -> str:
    issuer = DevIssuer(state_dir=settings.store.path, issuer=settings.issuer, audience=settings.audience)
    return issuer.mint(subject="tester", scopes=["mcp"], ttl=600)


async def call(
    client: httpx.AsyncClient,
    token: str,
    method: str,
    params: dict[str, Any] | None = None,
    *,
    name: str | None = None,
    meta: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
    message_id: int | str = 41,
) -> httpx.Response:
    body = modern_body(method, params, META if meta is None else meta, message_id)
    arguments = (params or {}).get("arguments")
    sent = headers if headers is not None else modern_headers(token, method, name, arguments=arguments)
    return await client.post("/mcp", json=body, headers=sent)


async def test_server_discover_names_the_versions_capabilities_and_server(
    client: httpx.AsyncClient, token: str
) -> None:
    """MCP 2026-07-28 server/discover, "Response"."""
    response = await call(client, token, "server/discover")

    assert response.status_code == 200, response.text
    result = response.json()["result"]
    assert result["supportedVersions"][0] == MODERN
    assert "2025-11-25" in result["supportedVersions"]
    assert {"tools", "resources", "prompts"} <= set(result["capabilities"])
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "aql-mcp"
    assert result["resultType"] == "complete"
    assert "mcp-session-id" not in response.headers


async def test_every_modern_result_says_it_is_complete_and_who_answered(client: httpx.AsyncClient, token: str) -> None:
    """MCP 2026-07-28 basic, "Per-response protocol fields"; caching on lists."""
    response = await call(client, token, "tools/list")

    result = response.json()["result"]
    assert result["resultType"] == "complete"
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["version"]
    assert result["ttlMs"] >= 0
    assert result["cacheScope"] in ("public", "private")


async def test_tools_are_listed_in_the_same_order_every_time(client: httpx.AsyncClient, token: str) -> None:
    first = (await call(client, token, "tools/list")).json()["result"]["tools"]
    second = (await call(client, token, "tools/list")).json()["result"]["tools"]
    assert [tool["name"] for tool in first] == [tool["name"] for tool in second]


async def test_an_mcp_aql_operation_runs_through_the_same_router(client: httpx.AsyncClient, token: str) -> None:
    params = {"name": "mcp_aql_read", "arguments": {"operation": "introspect", "params": {"query": "operations"}}}
    response = await call(client, token, "tools/call", params, name="mcp_aql_read")

    assert response.status_code == 200, response.text
    result = response.json()["result"]
    assert result["resultType"] == "complete"
    assert result.get("isError") is not True


async def test_missing_per_request_meta_is_400_invalid_params(client: httpx.AsyncClient, token: str) -> None:
    """MCP 2026-07-28 basic, "Per-request protocol fields": a missing required field is -32602, 400."""
    meta = {key: value for key, value in META.items() if not key.endswith("clientCapabilities")}
    error_of(await call(client, token, "tools/list", meta=meta), 400, -32602)


async def test_malformed_meta_comes_before_a_header_mismatch(client: httpx.AsyncClient, token: str) -> None:
    headers = modern_headers(token, "prompts/list")
    error_of(await call(client, token, "tools/list", meta={}, headers=headers), 400, -32602)


async def test_a_method_header_not_matching_the_body_is_400_header_mismatch(
    client: httpx.AsyncClient, token: str
) -> None:
    """MCP 2026-07-28 Streamable HTTP, "Server Validation"."""
    headers = modern_headers(token, "prompts/list")
    error_of(await call(client, token, "tools/list", headers=headers), 400, -32020)


async def test_a_missing_name_header_on_tools_call_is_400_header_mismatch(
    client: httpx.AsyncClient, token: str
) -> None:
    params = {"name": "test_simple_text", "arguments": {}}
    error_of(await call(client, token, "tools/call", params), 400, -32020)


async def test_a_base64_name_header_is_decoded_before_comparing(client: httpx.AsyncClient, token: str) -> None:
    encoded = "=?base64?" + base64.b64encode(b"test_simple_text").decode() + "?="
    params = {"name": "test_simple_text", "arguments": {}}
    response = await call(client, token, "tools/call", params, name=encoded)
    assert response.status_code == 200, response.text


async def test_a_version_header_not_matching_meta_is_400_header_mismatch(client: httpx.AsyncClient, token: str) -> None:
    meta = {**META, "io.modelcontextprotocol/protocolVersion": "2099-01-01"}
    error_of(await call(client, token, "tools/list", meta=meta), 400, -32020)


async def test_an_unsupported_version_names_the_supported_ones(client: httpx.AsyncClient, token: str) -> None:
    """MCP 2026-07-28 Versioning, "Protocol Version Negotiation": -32022 with `supported`, 400."""
    meta = {**META, "io.modelcontextprotocol/protocolVersion": "2099-01-01"}
    headers = modern_headers(token, "tools/list", version="2099-01-01")
    error = error_of(await call(client, token, "tools/list", meta=meta, headers=headers), 400, -32022)
    assert "2026-07-28" in error["data"]["supported"]
    assert error["data"]["requested"] == "2099-01-01"


async def test_an_unknown_method_is_404_method_not_found(client: httpx.AsyncClient, token: str) -> None:
    """MCP 2026-07-28 Streamable HTTP, "Protocol Version Header": 404 with -32601."""
    error_of(await call(client, token, "no/such", message_id="abc"), 404, -32601, "abc")


@pytest.mark.parametrize("method", ["ping", "logging/setLevel", "resources/subscribe", "initialize"])
async def test_methods_this_era_removed_are_404_method_not_found(
    client: httpx.AsyncClient, token: str, method: str
) -> None:
    """MCP 2026-07-28 changelog: ping and logging/setLevel are removed; no handshake, no subscribe."""
    error_of(await call(client, token, method), 404, -32601)


async def test_a_missing_resource_is_invalid_params_not_32002(client: httpx.AsyncClient, token: str) -> None:
    """MCP 2026-07-28 server/resources, "Error Handling"."""
    response = await call(client, token, "resources/read", {"uri": "test://missing"}, name="test://missing")
    error_of(response, 400, -32602)


@pytest.mark.parametrize("method", ["GET", "DELETE"])
async def test_get_and_delete_are_405_for_modern_requests(client: httpx.AsyncClient, token: str, method: str) -> None:
    """MCP 2026-07-28 Streamable HTTP, "Earlier Streamable HTTP Revisions"."""
    headers = {**modern_headers(token, "tools/list"), "mcp-session-id": "whatever"}
    response = await client.request(method, "/mcp", headers=headers)
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"


async def test_a_session_id_on_a_modern_request_is_ignored(client: httpx.AsyncClient, token: str) -> None:
    headers = {**modern_headers(token, "tools/list"), "mcp-session-id": "no-such-session"}
    response = await call(client, token, "tools/list", headers=headers)
    assert response.status_code == 200, response.text
    assert "mcp-session-id" not in response.headers


async def test_legacy_initialize_still_opens_a_session_with_the_modern_era_on(
    client: httpx.AsyncClient, token: str
) -> None:
    headers = {**MCP_HEADERS, "authorization": f"Bearer {token}"}
    response = await client.post("/mcp", json=rpc("initialize", initialize_params()), headers=headers)
    assert response.status_code == 200
    assert response.headers["mcp-session-id"]


async def test_with_the_modern_era_off_a_modern_request_is_400_invalid_request(tmp_path: Path) -> None:
    """Turned off, the legacy answer, which a dual-era client reads as "fall back to initialize"."""
    settings = dev_settings(tmp_path, mcp={"modern_era": False})
    issuer = DevIssuer(state_dir=settings.store.path, issuer=settings.issuer, audience=settings.audience)
    token = issuer.mint(subject="tester", scopes=["mcp"], ttl=600)
    async with asgi_client(settings) as http:
        response = await call(http, token, "server/discover")
    error_of(response, 400, -32600, message_id=response.json()["id"])
    assert "2026-07-28" not in response.json()["error"]["data"]["supported"]


@pytest.mark.parametrize(
    ("sent", "value"),
    [
        ("plain", "plain"),
        ("=?base64?SGVsbG8sIOS4lueVjA==?=", "Hello, 世界"),
        ("=?base64?not base64!?=", None),
    ],
)
def test_mirrored_header_values_are_decoded_from_the_base64_sentinel(sent: str, value: str | None) -> None:
    """MCP 2026-07-28 Streamable HTTP, "Value Encoding"."""
    assert decode_header_value(sent) == value


async def test_whitespace_around_a_mirrored_header_value_is_not_part_of_it(
    client: httpx.AsyncClient, token: str
) -> None:
    """RFC 9110 §5.5: a field value excludes the optional whitespace around it."""
    params = {"name": "test_simple_text", "arguments": {}}
    response = await call(client, token, "tools/call", params, name=" test_simple_text\t")
    assert response.status_code == 200, response.text


async def test_a_method_header_differing_only_in_case_is_a_mismatch(client: httpx.AsyncClient, token: str) -> None:
    """MCP 2026-07-28 Streamable HTTP, "Case Sensitivity": header values are case-sensitive."""
    headers = modern_headers(token, "Tools/List")
    error_of(await call(client, token, "tools/list", headers=headers), 400, -32020)


async def test_with_anonymous_listing_discover_and_tools_list_need_no_token_but_calls_do(tmp_path: Path) -> None:
    """`auth.anonymous_listing` applies to the modern era's discovery and lists as to the legacy ones."""
    settings = dev_settings(tmp_path, mcp={"modern_era": True}, auth={"anonymous_listing": True})
    async with asgi_client(settings) as http:
        headers = modern_headers("none", "server/discover")
        del headers["authorization"]
        discover = await call(http, "", "server/discover", headers=headers)
        call_headers = modern_headers("none", "tools/call", "test_simple_text")
        del call_headers["authorization"]
        params = {"name": "test_simple_text", "arguments": {}}
        refused = await call(http, "", "tools/call", params, headers=call_headers)
    assert discover.status_code == 200, discover.text
    assert refused.status_code == 401


async def test_a_caller_without_the_tools_scope_gets_the_scope_refusal_not_the_header_names(tmp_path: Path) -> None:
    """MCP 2026-07-28 Streamable HTTP, "Server Validation" vs the tool's scope (docs/eras.md,
    "Custom parameter headers"): the scope refusal comes first, whatever `Mcp-Param-*` the caller
    sent, so a -32020 never names the headers of a tool it may not call. A caller with the scope
    still gets the -32020."""
    policy = {"tools": {"test_custom_headers": ["region:ops"]}}
    settings = dev_settings(tmp_path, mcp={"modern_era": True}, auth={"policy": policy})
    issuer = DevIssuer(state_dir=settings.store.path, issuer=settings.issuer, audience=settings.audience)
    params = {"name": "test_custom_headers", "arguments": {"region": "eu", "priority": 1, "verbose": True}}
    async with asgi_client(settings) as client:
        for scopes in (["mcp"], ["mcp", "region:ops"]):
            token = issuer.mint(subject="tester", scopes=scopes, ttl=600)
            # No Mcp-Param-* header at all, though every argument is mirrored.
            response = await call(client, token, "tools/call", params, name="test_custom_headers")
            if scopes == ["mcp"]:
                assert response.status_code == 200, response.text
                result = response.json()["result"]
                assert result["isError"] is True
                assert "region:ops" in result["content"][0]["text"]
                assert "Mcp-Param" not in response.text
            else:
                assert error_of(response, 400, -32020)["data"]["header"].startswith("Mcp-Param-")


@pytest.mark.parametrize("header_version", [None, "2025-11-25", "2025-03-26"])
async def test_modern_meta_without_a_modern_header_reaches_the_modern_edge_as_a_header_mismatch(
    client: httpx.AsyncClient, token: str, header_version: str | None
) -> None:
    """MCP 2026-07-28 Versioning, "Backward Compatibility" (a request carrying modern per-request
    `_meta` is served by this revision) and Streamable HTTP, "Protocol Version Header" (the header
    MUST match `_meta`'s version, else 400 -32020): the body's `_meta` decides the era when the
    header names none or a legacy version, and the modern edge refuses the header."""
    headers = modern_headers(token, "tools/list")
    del headers["mcp-protocol-version"]
    if header_version is not None:
        headers["mcp-protocol-version"] = header_version
    error = error_of(await call(client, token, "tools/list", headers=headers), 400, -32020)
    assert error["data"]["header"] == "MCP-Protocol-Version"


async def test_legacy_meta_or_an_initialize_stays_in_the_legacy_era(client: httpx.AsyncClient, token: str) -> None:
    """MCP 2026-07-28 Versioning, "Backward Compatibility": `initialize` selects legacy semantics,
    whatever `_meta` it carries; a legacy version in `_meta` keeps the legacy edge."""
    headers = {**MCP_HEADERS, "authorization": f"Bearer {token}"}
    body = rpc("initialize", {**initialize_params(), "_meta": META}, 1)
    opened = await client.post("/mcp", json=body, headers=headers)
    assert opened.status_code == 200, opened.text
    assert opened.headers.get("mcp-session-id")
    legacy_meta = {**META, "io.modelcontextprotocol/protocolVersion": "2025-11-25"}
    listed = await client.post(
        "/mcp",
        json=modern_body("tools/list", None, legacy_meta, 5),
        headers={**headers, "mcp-protocol-version": "2025-11-25", "mcp-session-id": opened.headers["mcp-session-id"]},
    )
    assert listed.status_code == 200, listed.text
    assert "tools" in listed.json()["result"]
