"""An operator points production at an IdP over plain http (issue 12).

Whoever sits on the path to a plain-http JWKS can serve keys of their own and sign any token the
service then accepts; an introspection call over http hands them the caller's token and the
service's client secret. Production mode refuses to start with either URL on http unless the
operator sets `auth.allow_insecure_http` (for a test IdP on loopback); development mode allows it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.idp import IdentityProvider, running_idp
from tests.support.server import free_port, start_server

EXIT_SECONDS = 30.0


@pytest.fixture(scope="module")
def idp() -> Iterator[IdentityProvider]:
    with running_idp() as provider:
        yield provider


def production_env(idp: IdentityProvider, state: Path) -> dict[str, str]:
    return {
        **os.environ,
        "AQL_MCP_STORE__PATH": str(state),
        "AQL_MCP_AUTH__JWKS_URL": idp.jwks_url,
        "AQL_MCP_AUTH__ISSUER": idp.issuer,
        "AQL_MCP_AUTH__AUDIENCE": idp.audience,
    }


def test_production_refuses_to_start_with_a_plain_http_jwks_url_naming_the_variable(
    idp: IdentityProvider, tmp_path: Path
) -> None:
    """Corporate §7.1 (no unauthenticated transport): the key source itself must be authenticated."""
    command = [sys.executable, "-m", "aql_mcp.main", "serve", "--port", str(free_port())]
    fetches = idp.fetches

    done = subprocess.run(
        command, env=production_env(idp, tmp_path), capture_output=True, text=True, timeout=EXIT_SECONDS, check=False
    )

    assert done.returncode == 2
    assert "AQL_MCP_AUTH__JWKS_URL" in done.stderr
    assert "AQL_MCP_AUTH__ALLOW_INSECURE_HTTP" in done.stderr
    assert "Traceback" not in done.stderr
    assert idp.fetches == fetches, "the refused configuration still fetched keys over http"


def test_production_starts_with_a_plain_http_jwks_url_when_the_operator_opts_in(
    idp: IdentityProvider, tmp_path: Path
) -> None:
    env = {
        "AQL_MCP_AUTH__JWKS_URL": idp.jwks_url,
        "AQL_MCP_AUTH__ISSUER": idp.issuer,
        "AQL_MCP_AUTH__AUDIENCE": idp.audience,
        "AQL_MCP_AUTH__ALLOW_INSECURE_HTTP": "true",
    }

    with start_server(tmp_path, env=env, dev=False) as server:
        headers = {"authorization": f"Bearer {idp.mint()}", "accept": "application/json, text/event-stream"}
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        answer = httpx.post(server.url, json=ping, headers=headers, timeout=10)

    assert answer.status_code == 200
    assert answer.json() == {"jsonrpc": "2.0", "id": 1, "result": {}}


def test_check_config_refuses_a_plain_http_introspection_url(tmp_path: Path) -> None:
    """The introspection request carries the caller's token and the client secret."""
    env = {
        **os.environ,
        "AQL_MCP_STORE__PATH": str(tmp_path),
        "AQL_MCP_AUTH__INTROSPECTION_URL": "http://127.0.0.1:9/introspect",
        "AQL_MCP_AUTH__INTROSPECTION_CLIENT_ID": "aql-mcp",
        "AQL_MCP_AUTH__INTROSPECTION_CLIENT_SECRET": "not-a-real-secret",
    }
    command = [sys.executable, "-m", "aql_mcp.main", "check-config"]

    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=EXIT_SECONDS, check=False)

    assert done.returncode == 2
    assert "AQL_MCP_AUTH__INTROSPECTION_URL" in done.stderr
    assert "not-a-real-secret" not in done.stderr
