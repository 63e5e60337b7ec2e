"""The service trusts a real OpenID provider (issue 23): panva's oidc-provider, OpenID Certified and
written by others, over HTTPS behind a private CA made for the test (tests/support/oidc.py).

A real `aql-mcp serve` in production mode takes the provider's client-credentials tokens as they
come: JWT access tokens (RFC 9068) whose audience is the RFC 8707 resource they were asked for,
verified against the provider's JWKS with RS256, PS256, ES256 or EdDSA, and opaque tokens checked by
RFC 7662 introspection, revocation (RFC 7009) included. Scopes the provider granted decide what a
caller may do (`auth.required_scopes`, `auth.policy`). Without `auth.ca_bundle` the provider cannot
be reached and no token is judged: 503 + Retry-After (-32006), as docs/errors.md says.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import jwt
import pytest

from tests.support.aql import Session, session
from tests.support.asgi import MCP_HEADERS, initialize_params, rpc
from tests.support.oidc import OidcProvider, running_oidc_provider
from tests.support.server import ServerProcess, start_server

ORIGIN = "https://agents.example.com"
READ, WRITE = "aql:read", "aql:write"
UNAUTHORIZED, UPSTREAM_UNAVAILABLE = -32000, -32006


def production_env(idp: OidcProvider, *, ca_bundle: bool = True) -> dict[str, str]:
    """The provider's settings, a read scope for /mcp, a write scope for MCP-AQL creates, and no
    introspection cache, so that a revocation is seen on the next call."""
    return {
        **idp.service_env(ca_bundle=ca_bundle),
        "AQL_MCP_HTTP__ALLOWED_ORIGINS": json.dumps([ORIGIN]),
        "AQL_MCP_AUTH__REQUIRED_SCOPES": json.dumps([READ]),
        "AQL_MCP_AUTH__POLICY__FAMILIES": json.dumps({"create": [WRITE]}),
        "AQL_MCP_AUTH__INTROSPECTION_CACHE_SECONDS": "0",
    }


@pytest.fixture(scope="module")
def idp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OidcProvider]:
    with running_oidc_provider(tmp_path_factory.mktemp("oidc-provider")) as provider:
        yield provider


@pytest.fixture(scope="module")
def service(idp: OidcProvider, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with start_server(tmp_path_factory.mktemp("service"), env=production_env(idp), plugins=(), dev=False) as server:
        yield server


def initialize(server: ServerProcess, token: str) -> httpx.Response:
    headers = {**MCP_HEADERS, "authorization": f"Bearer {token}"}
    return httpx.post(server.url, json=rpc("initialize", initialize_params()), headers=headers, timeout=10.0)


def tool_names(agent: Session) -> set[str]:
    listed = agent.http.post("/mcp", json=rpc("tools/list"), headers=agent.headers)
    assert listed.status_code == 200, listed.text
    return {tool["name"] for tool in listed.json()["result"]["tools"]}


def assert_refused(response: httpx.Response, status: int, code: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error: dict[str, Any] = response.json()["error"]
    assert error["code"] == code
    assert "mcp-session-id" not in response.headers
    return error


def test_the_line_the_provider_printed_agrees_with_its_discovery_document(idp: OidcProvider) -> None:
    """The service is configured from what the provider announces (OpenID Connect Discovery 1.0 §3)."""
    announced = (idp.issuer, idp.jwks_uri, idp.token_endpoint, idp.introspection_endpoint, idp.revocation_endpoint)
    keys = ("issuer", "jwks_uri", "token_endpoint", "introspection_endpoint", "revocation_endpoint")
    assert tuple(idp.discovery[key] for key in keys) == announced
    assert "client_credentials" in idp.discovery["grant_types_supported"]


def test_a_jwt_for_the_service_lists_tools_and_writes_and_reads_through_mcp_aql(
    idp: OidcProvider, service: ServerProcess
) -> None:
    token = idp.token((READ, WRITE))
    with session(service, token=token) as agent:
        assert {"mcp_aql_create", "mcp_aql_read"} <= tool_names(agent)
        made = agent.call("mcp_aql_create", "create_collection", collection="oidc")
        written = agent.call("mcp_aql_create", "create_record", collection="oidc", data={"by": "oidc-provider"})
        read = agent.call("mcp_aql_read", "get_record", collection="oidc", id=written["data"]["id"])
        listed = agent.call("mcp_aql_read", "list_records", collection="oidc")
    assert made["success"] is True
    assert written["success"] is True
    assert (read["data"]["id"], read["data"]["by"]) == (written["data"]["id"], "oidc-provider")
    assert [item["id"] for item in listed["data"]["items"]] == [written["data"]["id"]]


def test_the_scopes_the_provider_granted_decide_what_the_caller_may_do(
    idp: OidcProvider, service: ServerProcess
) -> None:
    """A read-only token reads but may not create (`auth.policy`); one without the read scope is 403."""
    with session(service, token=idp.token((READ,))) as reader:
        assert reader.call("mcp_aql_read", "list_records", collection="oidc")["success"] is True
        denied = reader.call("mcp_aql_create", "create_collection", collection="refused")
    assert denied["success"] is False
    assert WRITE in json.dumps(denied["error"])
    error = assert_refused(initialize(service, idp.token(("mcp",))), 403, UNAUTHORIZED)
    assert error["data"]["scope"] == READ


def test_a_jwt_for_another_resource_is_refused(idp: OidcProvider, service: ServerProcess) -> None:
    """RFC 8707: the provider put the other resource in `aud`; the service is not that audience."""
    response = initialize(service, idp.token((READ, WRITE), resource="https://other.example/mcp"))
    assert_refused(response, 401, UNAUTHORIZED)
    assert 'error="invalid_token"' in response.headers["www-authenticate"]


def test_an_opaque_token_is_accepted_through_introspection_until_it_is_revoked(
    idp: OidcProvider, service: ServerProcess
) -> None:
    token = idp.opaque_token((READ,))
    assert token.count(".") != 2, "oidc-provider issued a JWT where an opaque token was asked for"
    with session(service, token=token) as agent:
        assert agent.call("mcp_aql_read", "list_records", collection="oidc")["success"] is True
        idp.revoke(token)
        after = agent.http.post("/mcp", json=rpc("tools/list"), headers=agent.headers)
    assert_refused(after, 401, UNAUTHORIZED)
    assert 'error="invalid_token"' in after.headers["www-authenticate"]


def test_an_opaque_token_the_provider_never_issued_is_refused(service: ServerProcess) -> None:
    response = initialize(service, "never-issued-by-the-provider-0123456789abcdef")
    assert_refused(response, 401, UNAUTHORIZED)


def test_without_the_ca_bundle_the_provider_cannot_be_asked_and_no_token_is_judged(
    idp: OidcProvider, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The provider's certificate chains to the test's CA only: TLS verification fails for the JWKS
    and for introspection, so a good token is neither accepted nor called invalid (docs/errors.md)."""
    env = production_env(idp, ca_bundle=False)
    with start_server(tmp_path_factory.mktemp("no-bundle"), env=env, plugins=(), dev=False) as server:
        answers = [initialize(server, idp.token((READ,))), initialize(server, idp.opaque_token((READ,)))]
        log = server.log_text()
    for response in answers:
        error = assert_refused(response, 503, UPSTREAM_UNAVAILABLE)
        assert response.headers["retry-after"].isdigit()
        assert error["data"]["retryAfter"] == int(response.headers["retry-after"])
        assert "www-authenticate" not in response.headers
    assert "introspection_failed" in log


@pytest.mark.parametrize("algorithm", ["PS256", "ES256", "EdDSA"])
def test_the_providers_tokens_verify_with_each_asymmetric_algorithm(
    algorithm: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The provider publishes a key for each algorithm, each with its `alg`; tokens signed with the one
    `auth.algorithms` allows are verified by their `kid`."""
    with (
        running_oidc_provider(tmp_path_factory.mktemp(f"oidc-{algorithm}"), algorithm=algorithm) as idp,
        start_server(tmp_path_factory.mktemp(algorithm), env=production_env(idp), plugins=(), dev=False) as server,
    ):
        token = idp.token((READ,))
        assert jwt.get_unverified_header(token)["alg"] == algorithm
        assert initialize(server, token).status_code == 200
        assert initialize(server, idp.token((READ,), resource="https://other.example/mcp")).status_code == 401
