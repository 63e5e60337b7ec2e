"""Origin allow-list and CORS: exact (scheme, host, port) matches only (2025-11-25 transports,
Security Warning; corporate §6)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from aql_mcp.middleware.origin import OriginPolicy, parse_origin
from tests.support.asgi import MCP_HEADERS, asgi_client, dev_settings, rpc

ALLOWED = "https://good.example"
LOOK_ALIKES = [
    "https://good.example.evil.test",
    "https://evil.test.good.example",
    "https://good.example:444",
    "http://good.example",
    "null",
    "https://good.example.",
    "https://good.example/path",
    "https://good.example@evil.test",
    "https://user@good.example",
    "https://good.example?x=1",
    "https://good.example:99999",
    "https://xgood.example",
    "wss://good.example",
    "",
]


@pytest.fixture
async def guarded(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(dev_settings(tmp_path, http={"allowed_origins": [ALLOWED]})) as http:
        yield http


def assert_forbidden(response: httpx.Response) -> None:
    assert response.status_code == 403
    body = response.json()
    assert body["jsonrpc"] == "2.0"
    assert body["error"]["code"] == -32600
    assert body["error"]["data"]["requestId"] == response.headers["x-request-id"]
    assert "access-control-allow-origin" not in response.headers


# --- parse_origin and OriginPolicy ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        ("https://good.example", ("https", "good.example", 443)),
        ("http://good.example", ("http", "good.example", 80)),
        ("https://good.example:8443", ("https", "good.example", 8443)),
        ("HTTPS://GOOD.Example", ("https", "good.example", 443)),
        ("http://[::1]:8000", ("http", "::1", 8000)),
        ("http://127.0.0.1:8000", ("http", "127.0.0.1", 8000)),
    ],
)
def test_parse_origin_yields_scheme_host_and_port(value: str, parsed: tuple[str, str, int]) -> None:
    assert parse_origin(value) == parsed


@pytest.mark.parametrize(
    "value",
    [
        "null",
        "",
        "good.example",
        "file:///etc/passwd",
        "https://",
        "https://a.example/path",
        "https://u:p@a.example",
        "https://a.example?q",
        "https://a.example:99999",
        "ftp://a.example",
        "javascript:alert(1)",
    ],
)
def test_parse_origin_refuses_what_is_not_an_origin(value: str) -> None:
    assert parse_origin(value) is None


def test_policy_allows_the_exact_origin_and_its_default_port() -> None:
    policy = OriginPolicy([ALLOWED])
    assert policy.is_allowed(ALLOWED)
    assert policy.is_allowed("https://good.example:443")
    assert policy.is_allowed("https://GOOD.EXAMPLE")


@pytest.mark.parametrize("origin", LOOK_ALIKES)
def test_policy_refuses_look_alike_origins(origin: str) -> None:
    assert not OriginPolicy([ALLOWED]).is_allowed(origin)


def test_policy_with_no_origins_refuses_every_origin() -> None:
    policy = OriginPolicy([])
    assert not policy.is_allowed(ALLOWED)
    assert not policy.is_allowed("http://127.0.0.1:8000")


@pytest.mark.parametrize(
    ("origin", "reason"),
    [
        ("https://evil.test", "not_allowed"),
        ("https://good.example:444", "not_allowed"),
        ("null", "null"),
        (" NULL ", "null"),
        ("https://good.example/path", "malformed"),
        ("https://user@good.example", "malformed"),
        ("", "malformed"),
        ("wss://good.example", "malformed"),
        (ALLOWED, None),
    ],
)
def test_policy_names_why_it_refuses_an_origin(origin: str, reason: str | None) -> None:
    assert OriginPolicy([ALLOWED]).refusal(origin) == reason


def test_policy_without_origins_refuses_for_want_of_an_allow_list() -> None:
    assert OriginPolicy([]).refusal(ALLOWED) == "no_allow_list"
    assert OriginPolicy([]).refusal("null") == "null"
    assert OriginPolicy(["*"]).refusal("null") is None


def test_policy_with_a_star_allows_any_origin() -> None:
    policy = OriginPolicy(["*"])
    assert policy.is_allowed("https://anything.example")
    assert policy.is_allowed("null")


# --- through the app ------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_allowed_origin_gets_cors_headers_that_expose_the_mcp_headers(guarded: httpx.AsyncClient) -> None:
    response = await guarded.get("/health", headers={"origin": ALLOWED})
    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] == ALLOWED
    exposed = {h.strip().lower() for h in response.headers["access-control-expose-headers"].split(",")}
    assert {"mcp-session-id", "mcp-protocol-version", "x-request-id"} <= exposed
    assert "origin" in response.headers["vary"].lower()


@pytest.mark.anyio
async def test_allowed_origin_on_the_mcp_endpoint_gets_cors_headers_on_errors_too(guarded: httpx.AsyncClient) -> None:
    response = await guarded.post("/mcp", json=rpc("ping"), headers={**MCP_HEADERS, "origin": ALLOWED})
    assert response.status_code == 401
    assert response.headers["access-control-allow-origin"] == ALLOWED


@pytest.mark.anyio
async def test_uppercase_host_of_an_allowed_origin_is_allowed(guarded: httpx.AsyncClient) -> None:
    response = await guarded.get("/health", headers={"origin": "https://GOOD.Example"})
    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] == "https://GOOD.Example"


@pytest.mark.anyio
async def test_preflight_of_an_allowed_origin_is_204_with_methods_and_headers(guarded: httpx.AsyncClient) -> None:
    """Corporate §6: preflight OPTIONS MUST be handled; it carries no credentials, so no 401."""
    headers = {
        "origin": ALLOWED,
        "access-control-request-method": "POST",
        "access-control-request-headers": "authorization, content-type, mcp-session-id",
    }
    response = await guarded.options("/mcp", headers=headers)
    assert response.status_code == 204
    assert response.headers["access-control-allow-origin"] == ALLOWED
    methods = {m.strip() for m in response.headers["access-control-allow-methods"].split(",")}
    assert {"GET", "POST", "DELETE"} <= methods
    allowed = {h.strip().lower() for h in response.headers["access-control-allow-headers"].split(",")}
    assert {"authorization", "content-type", "mcp-session-id", "mcp-protocol-version", "last-event-id"} <= allowed
    # The headers a 2026-07-28 request mirrors from its body (Streamable HTTP, "Standard Request Headers").
    assert {"mcp-method", "mcp-name"} <= allowed
    assert response.headers["x-request-id"]


@pytest.mark.anyio
async def test_preflight_allows_the_mcp_param_headers_it_asks_for_and_no_others(guarded: httpx.AsyncClient) -> None:
    """2026-07-28 Streamable HTTP, "Custom Headers from Tool Parameters": a browser client mirrors
    annotated arguments into `Mcp-Param-{Name}`, whose names differ per tool."""
    requested = "content-type, Mcp-Param-Region, mcp-param-priority, x-other, mcp-param-, mcp-param-a b, mcp-param-x:y"
    headers = {"origin": ALLOWED, "access-control-request-method": "POST", "access-control-request-headers": requested}
    response = await guarded.options("/mcp", headers=headers)
    assert response.status_code == 204
    allowed = {h.strip().lower() for h in response.headers["access-control-allow-headers"].split(",")}
    assert {"mcp-param-region", "mcp-param-priority", "mcp-method", "mcp-name"} <= allowed
    assert not {"x-other", "mcp-param-", "mcp-param-a b", "mcp-param-x:y"} & allowed
    assert "access-control-request-headers" in response.headers["vary"].lower()


@pytest.mark.anyio
async def test_preflight_allows_a_bounded_number_of_mcp_param_headers(guarded: httpx.AsyncClient) -> None:
    requested = ", ".join(f"mcp-param-p{n}" for n in range(500))
    headers = {"origin": ALLOWED, "access-control-request-method": "POST", "access-control-request-headers": requested}
    response = await guarded.options("/mcp", headers=headers)
    allowed = {h.strip().lower() for h in response.headers["access-control-allow-headers"].split(",")}
    assert 0 < len({h for h in allowed if h.startswith("mcp-param-")}) <= 32


@pytest.mark.anyio
@pytest.mark.parametrize("origin", [o for o in LOOK_ALIKES if o])
async def test_look_alike_origin_is_403(guarded: httpx.AsyncClient, origin: str) -> None:
    """2025-11-25 transports, Security Warning 1: an invalid Origin is 403."""
    assert_forbidden(await guarded.get("/health", headers={"origin": origin}))
    assert_forbidden(await guarded.post("/mcp", json=rpc("ping"), headers={**MCP_HEADERS, "origin": origin}))


@pytest.mark.anyio
async def test_preflight_of_a_refused_origin_is_403(guarded: httpx.AsyncClient) -> None:
    headers = {"origin": "https://evil.test", "access-control-request-method": "POST"}
    assert_forbidden(await guarded.options("/mcp", headers=headers))


@pytest.mark.anyio
async def test_request_without_origin_passes(guarded: httpx.AsyncClient) -> None:
    health = await guarded.get("/health")
    assert health.status_code == 200
    assert "access-control-allow-origin" not in health.headers
    # It reaches authentication: the origin check did not stop it.
    assert (await guarded.post("/mcp", json=rpc("ping"), headers=MCP_HEADERS)).status_code == 401


@pytest.mark.anyio
async def test_refused_origin_is_403_even_with_a_valid_token(guarded: httpx.AsyncClient, token: str) -> None:
    headers = {**MCP_HEADERS, "authorization": f"Bearer {token}", "origin": "https://evil.test"}
    assert_forbidden(await guarded.post("/mcp", json=rpc("ping"), headers=headers))


@pytest.mark.anyio
async def test_development_mode_allows_only_the_loopback_origins(client: httpx.AsyncClient) -> None:
    allowed = await client.get("/health", headers={"origin": "http://127.0.0.1:8000"})
    assert allowed.status_code == 200
    assert allowed.headers["access-control-allow-origin"] == "http://127.0.0.1:8000"
    assert (await client.get("/health", headers={"origin": "http://localhost:8000"})).status_code == 200
    assert_forbidden(await client.get("/health", headers={"origin": "http://evil.example"}))
    assert_forbidden(await client.get("/health", headers={"origin": "http://127.0.0.1:9999"}))
