"""An IdP behind a private corporate CA (`auth.ca_bundle`, issue 23): its JWKS is fetched over HTTPS
with that CA trusted beside the system's, so its tokens verify; without the bundle the JWKS cannot
be fetched and no token verifies. A real `aql-mcp serve` in production mode (http:// refused) and
the IdP double over HTTPS with a certificate from a CA made for the test."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from aql_mcp.auth.verifier import _trust
from aql_mcp.exceptions import ConfigError
from tests.support.asgi import MCP_HEADERS, initialize_params, rpc
from tests.support.idp import IdentityProvider, running_idp
from tests.support.server import start_server
from tests.support.tls import Tls, private_ca
from tests.support.wait import until

ORIGIN = "https://agents.example.com"


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Tls:
    return private_ca(tmp_path_factory.mktemp("corporate-ca"))


@pytest.fixture(scope="module")
def idp(tls: Tls) -> Iterator[IdentityProvider]:
    with running_idp(tls=tls) as provider:
        yield provider


def production_env(idp: IdentityProvider, **extra: str) -> dict[str, str]:
    return {
        "AQL_MCP_AUTH__JWKS_URL": idp.jwks_url,
        "AQL_MCP_AUTH__ISSUER": idp.issuer,
        "AQL_MCP_AUTH__AUDIENCE": idp.audience,
        "AQL_MCP_HTTP__ALLOWED_ORIGINS": json.dumps([ORIGIN]),
        **extra,
    }


def initialize(http: httpx.Client, token: str) -> int:
    headers = {**MCP_HEADERS, "authorization": f"Bearer {token}"}
    return http.post("/mcp", json=rpc("initialize", initialize_params()), headers=headers).status_code


def test_the_idps_tokens_verify_with_its_private_ca_trusted(idp: IdentityProvider, tls: Tls, tmp_path: Path) -> None:
    env = production_env(idp, AQL_MCP_AUTH__CA_BUNDLE=str(tls.ca))
    with start_server(tmp_path, env=env, dev=False) as server, httpx.Client(base_url=server.base, timeout=5.0) as http:
        token = idp.mint(claims={"sub": "erin"})
        until(lambda: initialize(http, token) == 200, "the JWKS behind the private CA was never fetched")


def test_without_the_bundle_the_jwks_cannot_be_fetched_and_no_token_verifies(
    idp: IdentityProvider, tmp_path: Path
) -> None:
    with (
        start_server(tmp_path, env=production_env(idp), dev=False) as server,
        httpx.Client(base_url=server.base, timeout=5.0) as http,
    ):
        statuses = {initialize(http, idp.mint()) for _ in range(3)}
        ready = http.get("/ready")
    assert statuses == {503}, "a JWKS behind an untrusted CA was used"
    assert "CERTIFICATE" not in ready.text  # the reason is in the log, never in a response


def test_a_bundle_that_is_not_pem_certificates_is_refused_naming_the_setting(tmp_path: Path) -> None:
    garbage = tmp_path / "ca.pem"
    garbage.write_text("not a certificate\n", encoding="utf-8")
    for path in (garbage, tmp_path / "missing.pem"):
        with pytest.raises(ConfigError, match=r"auth\.ca_bundle \(AQL_MCP_AUTH__CA_BUNDLE\)"):
            _trust(path)
