"""A real `aql-mcp serve` in production mode trusting an IdP double through `auth.issuers`: a delegated
token's actor chain on the call's `tool_call` line and its audit line, as digests (docs/identity.md,
"Delegation"), read from the server's real log output; a token from an unlisted issuer refused."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from aql_mcp.auth.principal import subject_digest
from tests.support.asgi import MCP_HEADERS, initialize_params, rpc
from tests.support.idp import IdentityProvider, running_idp
from tests.support.modern import MODERN, modern_body, modern_headers
from tests.support.redaction import remember_secret
from tests.support.server import ServerProcess, start_server
from tests.support.wait import until

SECONDS = 20.0
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientInfo": {"name": "issuers-e2e", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


@pytest.fixture(scope="module")
def idp() -> Iterator[IdentityProvider]:
    with running_idp() as provider:
        provider.rotate("EdDSA")
        yield provider


@pytest.fixture(scope="module")
def server(idp: IdentityProvider, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    entry = {
        "issuer": idp.issuer,
        "jwks_url": idp.jwks_url,
        "audiences": [idp.audience],
        "algorithms": ["EdDSA"],
        "claims": {"subject": "oid", "tenant": "tid", "scopes": ["scp"]},
    }
    env = {"AQL_MCP_AUTH__ISSUERS": json.dumps([entry]), "AQL_MCP_AUTH__ALLOW_INSECURE_HTTP": "true"}
    with start_server(tmp_path_factory.mktemp("issuers"), env=env, dev=False) as process:
        yield process


def token(idp: IdentityProvider, **claims: Any) -> str:
    base = {"oid": "user-1", "tid": "tenant-1", "scp": ["mcp"], "scope": None, "sub": "pairwise"}
    return remember_secret(idp.mint(alg="EdDSA", claims={**base, **claims}))


def lines_of(server: ServerProcess, request_id: str) -> list[dict[str, Any]]:
    """The JSON log lines of one request, once its access line (the request's last) is written."""

    def parsed() -> list[dict[str, Any]]:
        entries = (json.loads(line) for line in server.log_text().splitlines() if line.startswith("{"))
        return [entry for entry in entries if entry.get("request_id") == request_id]

    until(lambda: any(e["event"] == "http_request" for e in parsed()), f"request {request_id} was never logged")
    return parsed()


def call(server: ServerProcess, bearer: str, tool: str, operation: str, **params: Any) -> list[dict[str, Any]]:
    """One tools/call in a new legacy session; the log lines of its request."""
    headers = {**MCP_HEADERS, "authorization": f"Bearer {bearer}"}
    opened = httpx.post(server.url, json=rpc("initialize", initialize_params()), headers=headers, timeout=SECONDS)
    assert opened.status_code == 200, opened.text
    request_id = "act-" + secrets.token_hex(6)
    session = {
        **headers,
        "mcp-session-id": opened.headers["mcp-session-id"],
        "mcp-protocol-version": "2025-11-25",
        "x-request-id": request_id,
    }
    body = rpc("tools/call", {"name": tool, "arguments": {"operation": operation, "params": params}}, 3)
    response = httpx.post(server.url, json=body, headers=session, timeout=SECONDS)
    assert response.status_code == 200, response.text
    assert response.json()["result"]["structuredContent"]["success"] is True, response.text
    return lines_of(server, request_id)


def modern_call(server: ServerProcess, bearer: str, tool: str, operation: str, **params: Any) -> list[dict[str, Any]]:
    """One stateless 2026-07-28 tools/call; the log lines of its request."""
    request_id = "act-" + secrets.token_hex(6)
    headers = {**modern_headers(bearer, "tools/call", tool), "x-request-id": request_id}
    arguments = {"operation": operation, "params": params}
    body = modern_body("tools/call", {"name": tool, "arguments": arguments}, META, 4)
    response = httpx.post(server.url, json=body, headers=headers, timeout=SECONDS)
    assert response.status_code == 200, response.text
    assert response.json()["result"]["structuredContent"]["success"] is True, response.text
    return lines_of(server, request_id)


CALLERS = {"2025-11-25": call, MODERN: modern_call}


@pytest.mark.parametrize("era", CALLERS)
def test_a_delegated_call_names_its_actors_on_the_call_and_audit_lines(
    idp: IdentityProvider, server: ServerProcess, era: str
) -> None:
    delegated = token(idp, act={"sub": "agent-42", "act": {"sub": "planner-7"}})
    collection = "delegated_" + secrets.token_hex(4)

    lines = CALLERS[era](server, delegated, "mcp_aql_create", "create_collection", collection=collection)

    actors = [subject_digest(f"{idp.issuer}#{actor}") for actor in ("agent-42", "planner-7")]
    principal = subject_digest(f"{idp.issuer}#user-1")
    (tool_call,) = [line for line in lines if line["event"] == "tool_call"]
    assert (tool_call["subject"], tool_call["actors"]) == (principal, actors)
    (audit,) = [line for line in lines if line.get("audit") == "mutation"]
    assert (audit["operation"], audit["principal"], audit["actors"]) == ("create_collection", principal, actors)
    log = server.log_text()
    assert "agent-42" not in log
    assert "planner-7" not in log
    assert "user-1" not in log


def test_an_undelegated_call_names_no_actors(idp: IdentityProvider, server: ServerProcess) -> None:
    lines = call(server, token(idp), "mcp_aql_create", "create_collection", collection="direct_" + secrets.token_hex(4))

    (tool_call,) = [line for line in lines if line["event"] == "tool_call"]
    assert tool_call["actors"] is None
    (audit,) = [line for line in lines if line.get("audit") == "mutation"]
    assert "actors" not in audit


def test_a_token_from_an_unlisted_issuer_is_refused_with_401(idp: IdentityProvider, server: ServerProcess) -> None:
    headers = {**MCP_HEADERS, "authorization": f"Bearer {token(idp, iss='https://unlisted.test')}"}
    response = httpx.post(server.url, json=rpc("initialize", initialize_params()), headers=headers, timeout=SECONDS)

    assert response.status_code == 401
    assert 'error="invalid_token"' in response.headers["www-authenticate"]
    assert response.json()["error"]["code"] == -32000
