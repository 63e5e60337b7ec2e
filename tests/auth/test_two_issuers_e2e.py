"""Two identity providers trusted at once by a real `aql-mcp serve` in production mode (issue 23,
"Identity as corporate IdPs issue it"; docs/identity.md): the OpenID-certified oidc-provider as the
single-issuer settings, and a second key set (the IdP double) as an `auth.issuers` entry with a
Keycloak-like claim mapping and PS256/EdDSA keys. Both sit behind private CAs, trusted through one
`auth.ca_bundle` holding both. Each issuer's tokens verify with its own keys only; an issuer nobody
listed is refused with 401."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.asgi import MCP_HEADERS, initialize_params, rpc
from tests.support.idp import IdentityProvider, running_idp
from tests.support.oidc import OidcProvider, running_oidc_provider
from tests.support.redaction import remember_secret
from tests.support.server import ServerProcess, start_server
from tests.support.tls import Tls, private_ca

READ = "aql:read"
UNAUTHORIZED = -32000


@pytest.fixture(scope="module")
def oidc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OidcProvider]:
    with running_oidc_provider(tmp_path_factory.mktemp("oidc-provider")) as provider:
        yield provider


@pytest.fixture(scope="module")
def keycloak_tls(tmp_path_factory: pytest.TempPathFactory) -> Tls:
    return private_ca(tmp_path_factory.mktemp("keycloak-ca"))


@pytest.fixture(scope="module")
def keycloak(keycloak_tls: Tls) -> Iterator[IdentityProvider]:
    with running_idp(tls=keycloak_tls) as provider:
        provider.rotate("PS256")
        provider.rotate("EdDSA")
        yield provider


@pytest.fixture(scope="module")
def stranger() -> Iterator[IdentityProvider]:
    """An IdP no setting names: its tokens name the service's audience and are well signed."""
    with running_idp() as provider:
        yield provider


def bundle(directory: Path, *cas: Path) -> Path:
    """One PEM file holding every private CA the service must trust, as corporate bundles do."""
    path = directory / "corporate-cas.pem"
    path.write_bytes(b"".join(ca.read_bytes() for ca in cas))
    return path


@pytest.fixture(scope="module")
def service(
    oidc: OidcProvider, keycloak: IdentityProvider, keycloak_tls: Tls, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    state = tmp_path_factory.mktemp("two-issuers")
    entry = {
        "issuer": keycloak.issuer,
        "jwks_url": keycloak.jwks_url,
        "audiences": [keycloak.audience],
        "algorithms": ["PS256", "EdDSA"],
        "claims": {"subject": "preferred_username", "scopes": ["realm_access.roles"]},
    }
    env = {
        **oidc.service_env(introspection=False),
        "AQL_MCP_AUTH__CA_BUNDLE": str(bundle(state, oidc.tls.ca, keycloak_tls.ca)),
        "AQL_MCP_AUTH__ISSUERS": json.dumps([entry]),
        "AQL_MCP_AUTH__REQUIRED_SCOPES": json.dumps([READ]),
    }
    with start_server(state, env=env, plugins=(), dev=False) as server:
        yield server


def keycloak_token(idp: IdentityProvider, alg: str, **claims: Any) -> str:
    """What Keycloak issues: the user in `preferred_username`, roles under `realm_access`, no `scope`."""
    base = {"preferred_username": "kc-user", "realm_access": {"roles": [READ]}, "scope": None}
    return remember_secret(idp.mint(alg=alg, claims={**base, **claims}))


def initialize(server: ServerProcess, token: str) -> httpx.Response:
    headers = {**MCP_HEADERS, "authorization": f"Bearer {token}"}
    return httpx.post(server.url, json=rpc("initialize", initialize_params()), headers=headers, timeout=15.0)


def assert_invalid_token(response: httpx.Response) -> None:
    assert response.status_code == 401, response.text
    assert response.json()["error"]["code"] == UNAUTHORIZED
    assert 'error="invalid_token"' in response.headers["www-authenticate"]


def test_the_certified_providers_jwt_is_accepted(oidc: OidcProvider, service: ServerProcess) -> None:
    response = initialize(service, oidc.token((READ,)))
    assert response.status_code == 200, response.text
    assert "mcp-session-id" in response.headers


@pytest.mark.parametrize("alg", ["PS256", "EdDSA"])
def test_the_second_issuers_tokens_are_accepted_through_its_claim_mapping(
    keycloak: IdentityProvider, service: ServerProcess, alg: str
) -> None:
    assert initialize(service, keycloak_token(keycloak, alg)).status_code == 200


def test_the_second_issuers_roles_are_its_scopes(keycloak: IdentityProvider, service: ServerProcess) -> None:
    """Without `aql:read` among its realm roles the caller lacks the scope /mcp requires: 403."""
    response = initialize(service, keycloak_token(keycloak, "PS256", realm_access={"roles": ["other"]}))
    assert response.status_code == 403, response.text
    assert 'error="insufficient_scope"' in response.headers["www-authenticate"]


def test_a_token_claiming_the_other_issuer_does_not_verify(
    oidc: OidcProvider, keycloak: IdentityProvider, service: ServerProcess
) -> None:
    """Signed by the second issuer's key but claiming oidc-provider's `iss` (and audience): routed to
    oidc-provider's key set, where that key is unknown."""
    forged = keycloak_token(keycloak, "PS256", iss=oidc.issuer, aud=oidc.audience, scope=READ)
    assert_invalid_token(initialize(service, forged))


def test_an_algorithm_the_entry_does_not_list_is_refused(keycloak: IdentityProvider, service: ServerProcess) -> None:
    keycloak.rotate("RS256")
    assert_invalid_token(initialize(service, keycloak_token(keycloak, "RS256")))


def test_a_token_from_an_unlisted_issuer_is_refused(
    stranger: IdentityProvider, keycloak: IdentityProvider, service: ServerProcess
) -> None:
    token = remember_secret(stranger.mint(claims={"aud": keycloak.audience, "scope": READ}))
    assert_invalid_token(initialize(service, token))
