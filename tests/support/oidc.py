"""A real OpenID provider for tests: panva's `oidc-provider` from npm (OpenID Certified), run by the
project's Node over HTTPS with a certificate from a private CA made for the test.

    with running_oidc_provider(tmp_path) as idp:
        env = idp.service_env()                     # what `aql-mcp serve` needs to trust it
        jwt = idp.token(("aql:read",))              # a JWT access token for idp.audience
        other = idp.token(resource="https://other.example/mcp")   # a JWT for another resource
        opaque = idp.opaque_token(("aql:read",))    # opaque: the service asks RFC 7662 introspection
        idp.revoke(opaque)                          # RFC 7009: introspection now says inactive

Tokens come from the client_credentials grant of one confidential client (`idp.client`); a JWT's
`aud` is the RFC 8707 resource it was asked for and it is signed with `algorithm` (RS256, PS256,
ES256 or EdDSA; the JWKS publishes a key for each). The service introspects with a client of its
own (`idp.introspector`). `service_env` names the settings of src/aql_mcp/auth/settings.py.

scripts/node.sh installs Node 22 and the locked package (requirements/npm/oidc-provider-<VERSION>/);
tests/support/oidc_provider.mjs configures it. A machine that cannot install them fails: nothing skips.
"""

from __future__ import annotations

import json
import os
import secrets
import ssl
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.support.redaction import remember_secret
from tests.support.server import free_port
from tests.support.tls import Tls, private_ca
from tests.support.versions import OIDC_PROVIDER_PACKAGE, OIDC_PROVIDER_VERSION
from tests.support.wait import until

ROOT = Path(__file__).resolve().parents[2]
NODE_SCRIPT = ROOT / "scripts" / "node.sh"
PROGRAM = Path(__file__).with_name("oidc_provider.mjs")
DEFAULT_AUDIENCE = "https://aql-mcp.test/mcp"
SCOPES = ("mcp", "aql:read", "aql:write", "aql:operator")
STARTUP_SECONDS = 30.0
INSTALL_SECONDS = 300
START_ATTEMPTS = 3


@dataclass(frozen=True, slots=True)
class Client:
    """An OAuth client registered at the provider: its id and secret (client_secret_basic)."""

    id: str
    secret: str


@dataclass(frozen=True, slots=True)
class OidcProvider:
    """A running provider: its endpoints, the CA its certificate chains to, and its two clients."""

    issuer: str
    jwks_uri: str
    token_endpoint: str
    introspection_endpoint: str
    revocation_endpoint: str
    discovery: Mapping[str, Any]
    tls: Tls
    client: Client
    introspector: Client
    audience: str
    algorithm: str

    def token(self, scopes: Sequence[str] = ("aql:read",), *, resource: str | None = None) -> str:
        """A JWT access token for `resource` (default: the audience) with `scopes`."""
        return self._grant(scopes, resource or self.audience)

    def opaque_token(self, scopes: Sequence[str] = ("aql:read",)) -> str:
        """An opaque access token (asked for without a resource): the service must introspect it."""
        return self._grant(scopes, None)

    def revoke(self, token: str) -> None:
        """RFC 7009 revocation by the client the token was issued to."""
        response = self._post(self.revocation_endpoint, {"token": token, "token_type_hint": "access_token"})
        assert response.status_code == 200, response.text

    def service_env(self, *, ca_bundle: bool = True, introspection: bool = True) -> dict[str, str]:
        """The `AQL_MCP_AUTH__*` settings of a service that trusts this provider (optionally without
        the CA bundle, or without introspection)."""
        env = {
            "AQL_MCP_AUTH__ISSUER": self.issuer,
            "AQL_MCP_AUTH__JWKS_URL": self.jwks_uri,
            "AQL_MCP_AUTH__AUDIENCE": self.audience,
            "AQL_MCP_AUTH__ALGORITHMS": json.dumps([self.algorithm]),
        }
        if ca_bundle:
            env["AQL_MCP_AUTH__CA_BUNDLE"] = str(self.tls.ca)
        if introspection:
            env |= {
                "AQL_MCP_AUTH__INTROSPECTION_URL": self.introspection_endpoint,
                "AQL_MCP_AUTH__INTROSPECTION_CLIENT_ID": self.introspector.id,
                "AQL_MCP_AUTH__INTROSPECTION_CLIENT_SECRET": self.introspector.secret,
            }
        return env

    def _grant(self, scopes: Sequence[str], resource: str | None) -> str:
        form = {"grant_type": "client_credentials", "scope": " ".join(scopes)}
        if resource is not None:
            form["resource"] = resource
        response = self._post(self.token_endpoint, form)
        assert response.status_code == 200, response.text
        return remember_secret(str(response.json()["access_token"]))

    def _post(self, url: str, form: Mapping[str, str]) -> httpx.Response:
        auth = httpx.BasicAuth(self.client.id, self.client.secret)
        with httpx.Client(verify=trust(self.tls), timeout=10.0) as http:
            return http.post(url, data=dict(form), auth=auth)


@contextmanager
def running_oidc_provider(
    directory: Path,
    *,
    audience: str = DEFAULT_AUDIENCE,
    algorithm: str = "RS256",
    scopes: Sequence[str] = SCOPES,
) -> Iterator[OidcProvider]:
    """oidc-provider on a free port of 127.0.0.1 over HTTPS, stopped at exit; its log is
    `directory/oidc-provider.log`."""
    tls = private_ca(directory / "ca")
    client = Client("agent", remember_secret(secrets.token_urlsafe(24)))
    introspector = Client("aql-mcp", remember_secret(secrets.token_urlsafe(24)))
    settings = {
        "certificate": str(tls.certificate),
        "key": str(tls.key),
        "client": {"id": client.id, "secret": client.secret},
        "introspector": {"id": introspector.id, "secret": introspector.secret},
        "scopes": list(scopes),
        "algorithm": algorithm,
    }
    process, ready = _start(directory, settings)
    try:
        with httpx.Client(verify=trust(tls), timeout=10.0) as http:
            discovery = http.get(f"{ready['issuer']}/.well-known/openid-configuration").json()
        yield OidcProvider(
            issuer=ready["issuer"],
            jwks_uri=ready["jwks_uri"],
            token_endpoint=ready["token_endpoint"],
            introspection_endpoint=ready["introspection_endpoint"],
            revocation_endpoint=ready["revocation_endpoint"],
            discovery=discovery,
            tls=tls,
            client=client,
            introspector=introspector,
            audience=audience,
            algorithm=algorithm,
        )
    finally:
        _stop(process)


def trust(tls: Tls) -> ssl.SSLContext:
    """TLS verification that trusts the test's CA only: what reaches the provider checks its certificate."""
    return ssl.create_default_context(cafile=tls.ca)


def install() -> tuple[str, str]:
    """Node 22 and the locked oidc-provider tree (scripts/node.sh): the node binary and the package's directory."""
    node = _node_sh()
    return node, _node_sh(OIDC_PROVIDER_PACKAGE, OIDC_PROVIDER_VERSION, "oidc-provider")


def _node_sh(*args: str) -> str:
    done = subprocess.run([str(NODE_SCRIPT), *args], capture_output=True, text=True, timeout=INSTALL_SECONDS)
    if done.returncode != 0:
        raise RuntimeError(f"scripts/node.sh {' '.join(args)} failed:\n{done.stderr}")
    return done.stdout.strip().splitlines()[-1]


def _start(directory: Path, settings: dict[str, Any]) -> tuple[subprocess.Popen[bytes], dict[str, str]]:
    """The provider started on a free port, with the line it printed once listening; a port another
    process took meanwhile is tried again on another."""
    node, package = install()
    for attempt in range(1, START_ATTEMPTS + 1):
        process = _launch(directory, [node, str(PROGRAM)], package, {**settings, "port": free_port()})
        if process.poll() is None:
            ready: dict[str, str] = json.loads((directory / "oidc-provider.out").read_text())
            return process, ready
        log = (directory / "oidc-provider.log").read_text(errors="replace")
        if attempt == START_ATTEMPTS or "EADDRINUSE" not in log:
            raise RuntimeError(f"oidc-provider exited ({process.returncode}):\n{log}")
    raise AssertionError("unreachable")


def _launch(directory: Path, command: list[str], package: str, settings: dict[str, Any]) -> subprocess.Popen[bytes]:
    """One start, returned once the provider printed its line or exited."""
    out, log = directory / "oidc-provider.out", directory / "oidc-provider.log"
    environ = {
        **os.environ,
        "OIDC_PROVIDER_PACKAGE": package,
        "OIDC_PROVIDER_SETTINGS": json.dumps(settings),
    }
    with out.open("wb") as stdout, log.open("wb") as stderr:
        process = subprocess.Popen(command, env=environ, stdout=stdout, stderr=stderr)
    try:
        until(lambda: out.read_bytes().endswith(b"\n") or process.poll() is not None, "no line", STARTUP_SECONDS)
    except AssertionError:
        _stop(process)
        raise RuntimeError(f"oidc-provider did not start within {STARTUP_SECONDS} s:\n{log.read_text()}") from None
    return process


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
