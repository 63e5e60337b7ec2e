"""Two trusted issuers and the delegation policy through the real app, in process, with two IdP doubles
over real HTTP (docs/identity.md, docs/errors.md): what a refused token gets on the wire, which records
each issuer's callers see, what a delegated call may do, and the actor chain on the call's span."""

from __future__ import annotations

import re
import secrets
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from aql_mcp.app import create_app
from aql_mcp.auth.principal import subject_digest
from aql_mcp.settings import Settings
from tests.support.asgi import BASE, MCP_HEADERS, dev_settings, initialize_params, open_session, rpc
from tests.support.idp import IdentityProvider, running_idp

pytestmark = pytest.mark.anyio

CHALLENGE_PARAM = re.compile(r'\s*([A-Za-z_]+)="([^"]*)"\s*(?:,|$)')
AUDIENCE = "https://aql-mcp.test/mcp"


@pytest.fixture(scope="module")
def entra() -> Iterator[IdentityProvider]:
    with running_idp() as idp:
        yield idp


@pytest.fixture(scope="module")
def keycloak() -> Iterator[IdentityProvider]:
    with running_idp() as idp:
        yield idp


def service_settings(
    tmp_path: Path,
    entra: IdentityProvider,
    keycloak: IdentityProvider,
    records: dict[str, Any] | None = None,
    **auth: Any,
) -> Settings:
    issuers = [
        {
            "issuer": entra.issuer,
            "jwks_url": entra.jwks_url,
            "audiences": [AUDIENCE],
            "claims": {"subject": "oid", "tenant": "tid", "scopes": ["scp"]},
        },
        {
            "issuer": keycloak.issuer,
            "jwks_url": keycloak.jwks_url,
            "audiences": [AUDIENCE],
            "claims": {"tenant": "org", "scopes": ["realm_access.roles"]},
        },
    ]
    limits = {"rate_per_second": 10_000, "rate_burst": 10_000}
    return dev_settings(tmp_path, auth={"issuers": issuers, **auth}, limits=limits, records=records or {})


@pytest.fixture
async def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@asynccontextmanager
async def client_for(
    settings: Settings, exporter: InMemorySpanExporter | None = None
) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings, span_exporter=exporter)
    transport = httpx.ASGITransport(app=app)
    async with app.router.lifespan_context(app), httpx.AsyncClient(transport=transport, base_url=BASE) as http:
        yield http


@pytest.fixture
async def http(
    tmp_path: Path, entra: IdentityProvider, keycloak: IdentityProvider, exporter: InMemorySpanExporter
) -> AsyncIterator[httpx.AsyncClient]:
    settings = service_settings(
        tmp_path,
        entra,
        keycloak,
        policy={"operations": {"delete_collection": ["records:admin"], "create_collection": ["agent:write"]}},
        delegation={"refuse": ["records:admin"], "require": ["agent:write"]},
    )
    async with client_for(settings, exporter) as client:
        yield client


def entra_token(idp: IdentityProvider, oid: str = "alice", scp: str = "mcp", **claims: Any) -> str:
    return idp.mint(claims={"oid": oid, "tid": "tenant-a", "scp": scp, "scope": None, **claims})


def keycloak_token(idp: IdentityProvider, sub: str = "alice", roles: tuple[str, ...] = ("mcp",), **claims: Any) -> str:
    return idp.mint(claims={"sub": sub, "org": "acme", "realm_access": {"roles": list(roles)}, "scope": None, **claims})


def challenge(response: httpx.Response) -> dict[str, str]:
    scheme, _, params = response.headers["www-authenticate"].partition(" ")
    assert scheme == "Bearer"
    return dict(CHALLENGE_PARAM.findall(params))


async def initialize(http: httpx.AsyncClient, token: str) -> httpx.Response:
    headers = {**MCP_HEADERS, "authorization": f"Bearer {token}"}
    return await http.post("/mcp", json=rpc("initialize", initialize_params()), headers=headers)


async def call(http: httpx.AsyncClient, token: str, tool: str, operation: str, **params: Any) -> dict[str, Any]:
    session = await open_session(http, token)
    body = rpc("tools/call", {"name": tool, "arguments": {"operation": operation, "params": params}}, 9)
    response = await http.post("/mcp", json=body, headers=session)
    assert response.status_code == 200, response.text
    envelope: dict[str, Any] = response.json()["result"]["structuredContent"]
    return envelope


def assert_invalid_token(response: httpx.Response) -> None:
    """docs/errors.md: 401 with the challenge naming `invalid_token`, and a JSON-RPC error -32000."""
    assert response.status_code == 401
    params = challenge(response)
    assert params["error"] == "invalid_token"
    assert params["resource_metadata"] == f"{BASE}/.well-known/oauth-protected-resource"
    error = response.json()["error"]
    assert (error["code"], error["message"]) == (-32000, "Unauthorized: the bearer token is invalid or expired")


async def test_a_token_from_each_issuer_opens_a_session(
    http: httpx.AsyncClient, entra: IdentityProvider, keycloak: IdentityProvider
) -> None:
    assert (await initialize(http, entra_token(entra))).status_code == 200
    assert (await initialize(http, keycloak_token(keycloak))).status_code == 200


async def test_the_protected_resource_metadata_names_every_trusted_issuer(
    http: httpx.AsyncClient, entra: IdentityProvider, keycloak: IdentityProvider
) -> None:
    document = (await http.get("/.well-known/oauth-protected-resource")).json()
    assert document["authorization_servers"] == [BASE, entra.issuer, keycloak.issuer]


async def test_an_unlisted_issuer_gets_401_invalid_token(http: httpx.AsyncClient, entra: IdentityProvider) -> None:
    assert_invalid_token(await initialize(http, entra_token(entra, iss="https://unlisted.test")))


async def test_a_token_signed_by_one_issuer_claiming_the_other_gets_401_invalid_token(
    http: httpx.AsyncClient, entra: IdentityProvider, keycloak: IdentityProvider
) -> None:
    assert_invalid_token(await initialize(http, keycloak_token(entra, iss=keycloak.issuer)))
    assert_invalid_token(await initialize(http, entra_token(keycloak, iss=entra.issuer)))


async def test_the_same_subject_from_two_issuers_never_sees_the_others_records(
    http: httpx.AsyncClient, entra: IdentityProvider, keycloak: IdentityProvider
) -> None:
    collection = "mine_" + secrets.token_hex(4)
    writer = entra_token(entra, oid="alice", scp="mcp agent:write", act={"sub": "agent"})
    created = await call(http, writer, "mcp_aql_create", "create_collection", collection=collection)
    assert created["success"] is True, created

    same_issuer = await call(http, entra_token(entra, oid="alice"), "mcp_aql_read", "list_collections")
    other_issuer = await call(http, keycloak_token(keycloak, sub="alice"), "mcp_aql_read", "list_collections")
    assert collection in str(same_issuer["data"]), same_issuer
    assert other_issuer["success"] is True, other_issuer
    assert collection not in str(other_issuer["data"])


async def test_a_delegated_token_is_refused_a_scope_that_refuses_delegation(
    http: httpx.AsyncClient, keycloak: IdentityProvider
) -> None:
    token = keycloak_token(keycloak, roles=("mcp", "records:admin"), act={"sub": "agent-7"})
    envelope = await call(http, token, "mcp_aql_delete", "delete_collection", collection="any")
    assert envelope["success"] is False
    error = envelope["error"]
    assert error["code"] == "PERMISSION_DENIED"
    assert error["details"]["required_scope"] == "records:admin"
    assert error["details"]["delegation"] == "refused"


async def test_the_same_scope_without_delegation_is_allowed(
    http: httpx.AsyncClient, keycloak: IdentityProvider
) -> None:
    token = keycloak_token(keycloak, roles=("mcp", "records:admin"))
    absent = "absent_" + secrets.token_hex(3)
    envelope = await call(http, token, "mcp_aql_delete", "delete_collection", collection=absent)
    # Past the scope check: the gate asks to confirm a destructive operation, as for any caller.
    assert envelope["error"]["code"] == "CONFIRMATION_REQUIRED", envelope


async def test_an_undelegated_token_is_refused_a_scope_that_requires_delegation(
    http: httpx.AsyncClient, entra: IdentityProvider
) -> None:
    token = entra_token(entra, scp="mcp agent:write")
    envelope = await call(http, token, "mcp_aql_create", "create_collection", collection="c_" + secrets.token_hex(3))
    error = envelope["error"]
    assert (error["code"], error["details"]["delegation"]) == ("PERMISSION_DENIED", "required")


async def test_a_delegated_call_names_its_actor_chain_on_its_span(
    http: httpx.AsyncClient, entra: IdentityProvider, exporter: InMemorySpanExporter
) -> None:
    token = entra_token(entra, scp="mcp agent:write", act={"sub": "agent-7", "act": {"sub": "planner"}})
    await call(http, token, "mcp_aql_create", "create_collection", collection="span_" + secrets.token_hex(3))
    undelegated = entra_token(entra)
    await call(http, undelegated, "mcp_aql_read", "list_collections")

    calls = [s for s in exporter.get_finished_spans() if s.name.startswith("tools/call")]
    by_tool = {s.name: s for s in calls}
    qualified = [subject_digest(f"{entra.issuer}#{actor}") for actor in ("agent-7", "planner")]
    assert list(by_tool["tools/call mcp_aql_create"].attributes["mcp.actors"]) == qualified
    assert "mcp.actors" not in by_tool["tools/call mcp_aql_read"].attributes
    for span in calls:
        assert "agent-7" not in str(dict(span.attributes))


async def test_a_required_scope_refused_to_delegated_tokens_is_403_before_the_body_is_read(
    tmp_path: Path, entra: IdentityProvider, keycloak: IdentityProvider
) -> None:
    settings = service_settings(tmp_path, entra, keycloak, required_scopes=["mcp"], delegation={"refuse": ["mcp"]})
    async with client_for(settings) as http:
        refused = await initialize(http, entra_token(entra, act={"sub": "agent"}))
        allowed = await initialize(http, entra_token(entra))

    assert refused.status_code == 403
    params = challenge(refused)
    assert (params["error"], params["scope"]) == ("insufficient_scope", "mcp")
    assert params["error_description"] == "a delegated token (act) may not use this scope"
    data = refused.json()["error"]["data"]
    assert (data["reason"], data["scope"], data["delegation"]) == ("insufficient_scope", "mcp", "refused")
    assert allowed.status_code == 200


async def test_a_required_scope_that_requires_delegation_is_403_for_a_direct_token(
    tmp_path: Path, entra: IdentityProvider, keycloak: IdentityProvider
) -> None:
    settings = service_settings(tmp_path, entra, keycloak, required_scopes=["mcp"], delegation={"require": ["mcp"]})
    async with client_for(settings) as http:
        refused = await initialize(http, keycloak_token(keycloak))
        allowed = await initialize(http, keycloak_token(keycloak, act={"sub": "agent"}))

    assert refused.status_code == 403
    assert challenge(refused)["error_description"] == "only a delegated token (act) may use this scope"
    assert refused.json()["error"]["data"]["delegation"] == "required"
    assert allowed.status_code == 200


async def test_a_mapped_tenant_shares_records_within_its_issuer_only(
    tmp_path: Path, entra: IdentityProvider, keycloak: IdentityProvider
) -> None:
    """`records.tenant_claim` other than `sub` reads the tenant each issuer maps (`tid`, `org`)."""
    settings = service_settings(tmp_path, entra, keycloak, records={"tenant_claim": "tenant"})
    collection = "team_" + secrets.token_hex(4)
    async with client_for(settings) as http:
        created = await call(
            http, entra_token(entra, oid="alice"), "mcp_aql_create", "create_collection", collection=collection
        )
        colleague = await call(http, entra_token(entra, oid="bob"), "mcp_aql_read", "list_collections")
        # Keycloak's tenant has the same value, `tenant-a`, but it is another issuer's tenant.
        stranger = await call(http, keycloak_token(keycloak, org="tenant-a"), "mcp_aql_read", "list_collections")
        unmapped = await call(http, keycloak_token(keycloak, org=None), "mcp_aql_read", "list_collections")

    assert created["success"] is True, created
    assert collection in str(colleague["data"])
    assert stranger["success"] is True
    assert collection not in str(stranger["data"])
    assert unmapped["error"]["code"] == "PERMISSION_DENIED"


async def test_a_prompt_and_a_tool_refused_by_the_delegation_policy_say_so(
    tmp_path: Path, entra: IdentityProvider, keycloak: IdentityProvider
) -> None:
    policy = {"prompts": {"test_simple_prompt": ["prompts"]}, "tools": {"mcp_aql_read": ["reader"]}}
    settings = service_settings(
        tmp_path, entra, keycloak, policy=policy, delegation={"refuse": ["prompts"], "require": ["reader"]}
    )
    async with client_for(settings) as http:
        delegated = await open_session(http, entra_token(entra, scp="mcp prompts reader", act={"sub": "agent"}))
        prompt = await http.post("/mcp", json=rpc("prompts/get", {"name": "test_simple_prompt"}, 4), headers=delegated)
        direct = await open_session(http, entra_token(entra, scp="mcp prompts reader"))
        tool = rpc("tools/call", {"name": "mcp_aql_read", "arguments": {"operation": "list_collections"}}, 5)
        refused_tool = await http.post("/mcp", json=tool, headers=direct)
        allowed_tool = await http.post("/mcp", json=tool, headers=delegated)

    data = prompt.json()["error"]["data"]
    assert (data["reason"], data["scope"], data["delegation"]) == ("insufficient_scope", "prompts", "refused")
    result = refused_tool.json()["result"]
    assert result["isError"] is True
    assert "reader" in result["content"][0]["text"]
    assert "delegation policy" in result["content"][0]["text"]
    assert allowed_tool.json()["result"]["structuredContent"]["success"] is True
