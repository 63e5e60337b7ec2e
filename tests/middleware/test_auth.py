"""Bearer authentication on `/mcp` through the real app, in process (corporate §7, Appendix A; RFC 6750 §3).

Required scopes (403 `insufficient_scope`), anonymous listing (corporate §7.1 MAY: listing only,
everything else 401), and development-mode HS256 tokens.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest

from aql_mcp.auth.dev_issuer import DevIssuer
from aql_mcp.settings import Settings
from tests.support.asgi import MCP_HEADERS, asgi_client, dev_settings, initialize_params, open_session, rpc

pytestmark = pytest.mark.anyio

REALM = "aql-mcp"
CHALLENGE_PARAM = re.compile(r'\s*([A-Za-z_]+)="([^"]*)"\s*(?:,|$)')
HS256_SECRET = "s" * 32


def mint(settings: Settings, *, subject: str = "tester", scopes: tuple[str, ...] = ("mcp",)) -> str:
    issuer = DevIssuer(state_dir=settings.store.path, issuer=settings.issuer, audience=settings.audience)
    return issuer.mint(subject=subject, scopes=list(scopes), ttl=600)


def bearer(token: str) -> dict[str, str]:
    return {**MCP_HEADERS, "authorization": f"Bearer {token}"}


def challenge(response: httpx.Response) -> dict[str, str]:
    """The parameters of a `WWW-Authenticate: Bearer k="v", ...` challenge (RFC 6750 §3)."""
    value = response.headers["www-authenticate"]
    scheme, _, params = value.partition(" ")
    assert scheme == "Bearer"
    return dict(CHALLENGE_PARAM.findall(params))


def error_of(response: httpx.Response) -> dict[str, Any]:
    body = response.json()
    assert body["jsonrpc"] == "2.0"
    error: dict[str, Any] = body["error"]
    return error


async def initialize(http: httpx.AsyncClient, headers: dict[str, str]) -> httpx.Response:
    return await http.post("/mcp", json=rpc("initialize", initialize_params()), headers=headers)


# Required scopes -------------------------------------------------------------------------------


async def test_a_token_without_a_required_scope_gets_403_insufficient_scope(tmp_path: Path) -> None:
    """RFC 6750 §3.1 and corporate B.2: lacking scope for the endpoint is HTTP 403 with the challenge."""
    settings = dev_settings(tmp_path, auth={"required_scopes": ["mcp"]})

    async with asgi_client(settings) as http:
        response = await initialize(http, bearer(mint(settings, scopes=("read",))))

    assert response.status_code == 403
    params = challenge(response)
    assert params["error"] == "insufficient_scope"
    assert params["scope"] == "mcp"
    assert params["realm"] == REALM
    assert params["resource_metadata"] == f"{settings.base_url}/.well-known/oauth-protected-resource"
    error = error_of(response)
    assert error["code"] == -32000
    assert error["data"]["reason"] == "insufficient_scope"
    assert error["data"]["scope"] == "mcp"


async def test_the_insufficient_scope_challenge_names_only_the_missing_scopes(tmp_path: Path) -> None:
    settings = dev_settings(tmp_path, auth={"required_scopes": ["mcp", "records", "write"]})

    async with asgi_client(settings) as http:
        response = await initialize(http, bearer(mint(settings, scopes=("mcp", "write"))))

    assert response.status_code == 403
    assert challenge(response)["scope"] == "records"
    assert error_of(response)["data"]["scope"] == "records"


async def test_a_token_with_every_required_scope_is_served(tmp_path: Path) -> None:
    settings = dev_settings(tmp_path, auth={"required_scopes": ["mcp"]})

    async with asgi_client(settings) as http:
        headers = await open_session(http, mint(settings, scopes=("mcp", "read")))
        listed = await http.post("/mcp", json=rpc("tools/list", {}, 2), headers=headers)

    assert listed.status_code == 200
    assert listed.json()["result"]["tools"]


async def test_insufficient_scope_is_decided_before_the_body_is_read(tmp_path: Path) -> None:
    settings = dev_settings(tmp_path, auth={"required_scopes": ["mcp"]})

    async with asgi_client(settings) as http:
        response = await http.post("/mcp", content=b"{not json", headers=bearer(mint(settings, scopes=())))

    assert response.status_code == 403


async def test_an_invalid_token_is_401_even_when_scopes_are_required(tmp_path: Path) -> None:
    settings = dev_settings(tmp_path, auth={"required_scopes": ["mcp"]})

    async with asgi_client(settings) as http:
        response = await initialize(http, bearer(mint(settings) + "x"))

    assert response.status_code == 401
    assert challenge(response)["error"] == "invalid_token"
    assert "scope" not in challenge(response)


# Anonymous listing -----------------------------------------------------------------------------


async def open_anonymous_session(http: httpx.AsyncClient) -> dict[str, str]:
    response = await initialize(http, MCP_HEADERS)
    assert response.status_code == 200, response.text
    headers = {
        **MCP_HEADERS,
        "mcp-session-id": response.headers["mcp-session-id"],
        "mcp-protocol-version": "2025-11-25",
    }
    done = await http.post("/mcp", json=rpc("notifications/initialized", message_id=None), headers=headers)
    assert done.status_code == 202
    return headers


async def test_anonymous_listing_serves_initialize_tools_list_prompts_list_and_ping_without_a_token(
    tmp_path: Path,
) -> None:
    """Corporate §7.1: listing MAY be allowed without a token."""
    async with asgi_client(dev_settings(tmp_path, auth={"anonymous_listing": True})) as http:
        headers = await open_anonymous_session(http)
        tools = await http.post("/mcp", json=rpc("tools/list", {}, 2), headers=headers)
        prompts = await http.post("/mcp", json=rpc("prompts/list", {}, 3), headers=headers)
        ping = await http.post("/mcp", json=rpc("ping", {}, 4), headers=headers)

    assert tools.status_code == 200
    assert any(tool["name"] == "test_simple_text" for tool in tools.json()["result"]["tools"])
    assert prompts.status_code == 200
    assert any(prompt["name"] == "test_simple_prompt" for prompt in prompts.json()["result"]["prompts"])
    assert ping.status_code == 200
    assert ping.json()["result"] == {}


REFUSED_ANONYMOUS: dict[str, dict[str, Any]] = {
    "tools/call": {"name": "test_simple_text", "arguments": {}},
    "resources/read": {"uri": "test://static-text"},
    "prompts/get": {"name": "test_simple_prompt"},
    "resources/list": {},
    "resources/templates/list": {},
    "completion/complete": {
        "ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"},
        "argument": {"name": "arg1", "value": "a"},
    },
    "logging/setLevel": {"level": "info"},
}


@pytest.mark.parametrize("method", REFUSED_ANONYMOUS)
async def test_anonymous_listing_still_needs_a_token_for_everything_else(tmp_path: Path, method: str) -> None:
    """Corporate §7.1: only listing MAY be anonymous; a missing token is HTTP 401 (§7.4)."""
    async with asgi_client(dev_settings(tmp_path, auth={"anonymous_listing": True})) as http:
        headers = await open_anonymous_session(http)
        response = await http.post("/mcp", json=rpc(method, REFUSED_ANONYMOUS[method], 2), headers=headers)

    assert response.status_code == 401
    assert error_of(response)["code"] == -32000


@pytest.mark.parametrize("method", ["tools/call", "resources/read", "prompts/get"])
async def test_an_anonymous_call_refused_by_the_endpoint_carries_the_bearer_challenge(
    tmp_path: Path, method: str
) -> None:
    """Corporate Appendix C.2: a 401 MUST carry `WWW-Authenticate: Bearer ...` (no `error`: RFC 6750 §3.1)."""
    settings = dev_settings(tmp_path, auth={"anonymous_listing": True})

    async with asgi_client(settings) as http:
        headers = await open_anonymous_session(http)
        response = await http.post("/mcp", json=rpc(method, REFUSED_ANONYMOUS[method], 2), headers=headers)

    params = challenge(response)
    assert params["realm"] == REALM
    assert params["resource_metadata"] == f"{settings.base_url}/.well-known/oauth-protected-resource"
    assert "error" not in params


async def test_anonymous_listing_refuses_a_presented_bad_token_instead_of_ignoring_it(tmp_path: Path) -> None:
    settings = dev_settings(tmp_path, auth={"anonymous_listing": True})

    async with asgi_client(settings) as http:
        response = await initialize(http, bearer("not-a-token"))

    assert response.status_code == 401
    assert challenge(response)["error"] == "invalid_token"


async def test_a_token_caller_in_anonymous_listing_mode_is_served_in_full(tmp_path: Path) -> None:
    settings = dev_settings(tmp_path, auth={"anonymous_listing": True})

    async with asgi_client(settings) as http:
        headers = await open_session(http, mint(settings))
        call = {"name": "test_simple_text", "arguments": {}}
        response = await http.post("/mcp", json=rpc("tools/call", call, 2), headers=headers)

    assert response.status_code == 200
    assert response.json()["result"]["content"]


async def test_an_anonymous_caller_cannot_use_a_session_opened_with_a_token(tmp_path: Path) -> None:
    settings = dev_settings(tmp_path, auth={"anonymous_listing": True})

    async with asgi_client(settings) as http:
        owned = await open_session(http, mint(settings))
        anonymous = {k: v for k, v in owned.items() if k != "authorization"}
        response = await http.post("/mcp", json=rpc("tools/list", {}, 2), headers=anonymous)

    assert response.status_code == 404
    assert error_of(response)["code"] == -32001


async def test_without_anonymous_listing_initialize_needs_a_token(tmp_path: Path) -> None:
    settings = dev_settings(tmp_path)

    async with asgi_client(settings) as http:
        response = await initialize(http, MCP_HEADERS)

    assert response.status_code == 401
    params = challenge(response)
    assert params["realm"] == REALM
    assert "error" not in params
    assert error_of(response)["code"] == -32000
    assert "mcp-session-id" not in response.headers


# Development HS256 -----------------------------------------------------------------------------


def hs256(settings: Settings, secret: str, **header: Any) -> str:
    now = int(time.time())
    claims = {"iss": settings.issuer, "aud": settings.audience, "sub": "dev", "iat": now, "exp": now + 600}
    return jwt.encode({**claims, "scope": "mcp"}, secret, algorithm="HS256", headers=header or None)


@pytest.fixture
def hs256_settings(tmp_path: Path) -> Settings:
    return dev_settings(tmp_path, auth={"algorithms": ["ES256", "HS256"], "hs256_secret": HS256_SECRET})


async def test_development_mode_accepts_an_hs256_token_signed_with_the_configured_secret(
    hs256_settings: Settings,
) -> None:
    async with asgi_client(hs256_settings) as http:
        response = await initialize(http, bearer(hs256(hs256_settings, HS256_SECRET)))

    assert response.status_code == 200
    assert "mcp-session-id" in response.headers


async def test_development_mode_refuses_an_hs256_token_signed_with_another_secret(hs256_settings: Settings) -> None:
    async with asgi_client(hs256_settings) as http:
        response = await initialize(http, bearer(hs256(hs256_settings, "t" * 32)))

    assert response.status_code == 401
    assert challenge(response)["error"] == "invalid_token"


async def test_an_hs256_token_naming_a_kid_is_refused(hs256_settings: Settings) -> None:
    """The HS256 secret has no kid; a token naming the dev issuer's kid must not switch its key to HMAC."""
    issuer = DevIssuer(state_dir=hs256_settings.store.path, issuer=hs256_settings.issuer, audience="x")

    async with asgi_client(hs256_settings) as http:
        response = await initialize(http, bearer(hs256(hs256_settings, HS256_SECRET, kid=issuer.kid)))

    assert response.status_code == 401


async def test_an_unsigned_token_is_refused_even_with_hs256_on(hs256_settings: Settings) -> None:
    now = int(time.time())
    claims = {"iss": hs256_settings.issuer, "aud": hs256_settings.audience, "sub": "dev", "exp": now + 600}
    token = jwt.encode(claims, "", algorithm="none")

    async with asgi_client(hs256_settings) as http:
        response = await initialize(http, bearer(token))

    assert response.status_code == 401


async def test_an_hs256_token_is_refused_when_hs256_is_not_an_allowed_algorithm(tmp_path: Path) -> None:
    """`auth.algorithms` is the explicit allow-list of JWT algorithms (config/default.yaml)."""
    settings = dev_settings(tmp_path, auth={"algorithms": ["ES256"], "hs256_secret": HS256_SECRET})

    async with asgi_client(settings) as http:
        response = await initialize(http, bearer(hs256(settings, HS256_SECRET)))

    assert response.status_code == 401


# The id of a refused modern request -------------------------------------------------------------

MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


def modern_request(method: str, message_id: int | str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return rpc(method, {**(params or {}), "_meta": MODERN_META}, message_id)


def modern_headers(method: str, token: str | None = None, *, version: str | None = "2026-07-28") -> dict[str, str]:
    headers = {**MCP_HEADERS, "mcp-method": method}
    if version is not None:
        headers["mcp-protocol-version"] = version
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    return headers


@pytest.mark.parametrize("version", ["2026-07-28", None, "2025-11-25"], ids=["header", "meta-only", "legacy-header"])
async def test_a_refused_modern_request_gets_its_own_id_and_the_challenge(tmp_path: Path, version: str | None) -> None:
    """MCP 2026-07-28 basic (JSON-RPC: a response carries its request's id; the error of a request
    whose id was read is not `id: null`) and Streamable HTTP, "Protocol Version Header"; RFC 6750 §3:
    a missing or invalid token is 401 with the challenge, and the request's id. A modern request
    is one whose header or, failing that, whose `_meta` names a modern version."""
    settings = dev_settings(tmp_path, mcp={"modern_era": True})
    async with asgi_client(settings) as http:
        missing = await http.post(
            "/mcp", json=modern_request("tools/list", "m-1"), headers=modern_headers("tools/list", version=version)
        )
        invalid = await http.post(
            "/mcp",
            json=modern_request("tools/list", 42),
            headers=modern_headers("tools/list", "not-a-token", version=version),
        )
    assert missing.status_code == 401
    assert missing.json()["id"] == "m-1"
    assert challenge(missing)["realm"] == REALM
    assert invalid.status_code == 401
    assert invalid.json()["id"] == 42
    assert challenge(invalid)["error"] == "invalid_token"


async def test_a_modern_request_refused_for_its_scopes_or_by_the_endpoint_gets_its_own_id(tmp_path: Path) -> None:
    """RFC 6750 §3.1 `insufficient_scope` (403), and the endpoint's own refusal of an anonymous
    call under anonymous listing (corporate §7.1): both answer with the request's id."""
    scoped = dev_settings(tmp_path / "scoped", mcp={"modern_era": True}, auth={"required_scopes": ["mcp:use"]})
    async with asgi_client(scoped) as http:
        refused = await http.post(
            "/mcp", json=modern_request("tools/list", 7), headers=modern_headers("tools/list", mint(scoped))
        )
    assert refused.status_code == 403
    assert refused.json()["id"] == 7
    assert challenge(refused)["error"] == "insufficient_scope"
    anonymous = dev_settings(tmp_path / "anon", mcp={"modern_era": True}, auth={"anonymous_listing": True})
    params = {"name": "test_simple_text", "arguments": {}}
    async with asgi_client(anonymous) as http:
        headers = {**modern_headers("tools/call"), "mcp-name": "test_simple_text"}
        called = await http.post("/mcp", json=modern_request("tools/call", "c-9", params), headers=headers)
    assert called.status_code == 401
    assert called.json()["id"] == "c-9"
    assert challenge(called)["realm"] == REALM


async def test_a_legacy_or_a_large_refused_request_keeps_id_null(tmp_path: Path) -> None:
    """The body of a refused request is read only up to 64 KiB: a larger one is refused without
    its id (nothing large is parsed for a caller without a token); a legacy request keeps `id: null`."""
    settings = dev_settings(tmp_path, mcp={"modern_era": True})
    padding = {"padding": "x" * (70 * 1024)}
    async with asgi_client(settings) as http:
        legacy = await http.post("/mcp", json=rpc("initialize", initialize_params(), 3), headers=MCP_HEADERS)
        large = await http.post(
            "/mcp", json=modern_request("tools/list", 5, padding), headers=modern_headers("tools/list")
        )
    assert legacy.status_code == 401
    assert legacy.json()["id"] is None
    assert large.status_code == 401
    assert large.json()["id"] is None
    assert "www-authenticate" in large.headers
