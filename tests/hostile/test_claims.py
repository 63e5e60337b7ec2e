"""Tokens whose claims have the wrong type, sent to a real `aql-mcp serve` (issue 12): a JWT whose
`exp` was a string was read as a number and accepted. RFC 7519 §4.1.4 makes `exp` a NumericDate,
a JSON number; corporate standard Appendix A.1 makes its validation a MUST."""

from __future__ import annotations

import time
from typing import Any

import httpx
import jwt
import pytest

from aql_mcp.auth.dev_issuer import DevIssuer
from tests.support.server import ServerProcess

HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}


def _token(server: ServerProcess, **changes: Any) -> str:
    issuer = DevIssuer(state_dir=server.state, issuer=server.base, audience=server.url)
    now = int(time.time())
    claims: dict[str, Any] = {"iss": server.base, "aud": server.url, "sub": "eve", "iat": now, "exp": now + 600}
    claims["scope"] = "mcp"
    claims.update(changes)
    return jwt.encode(claims, issuer.private_key, algorithm="ES256", headers={"kid": issuer.kid})


@pytest.mark.parametrize(
    "changes",
    [
        pytest.param({"exp": str(int(time.time()) + 600)}, id="exp-as-string"),
        pytest.param({"exp": True}, id="exp-as-boolean"),
        pytest.param({"nbf": str(int(time.time()))}, id="nbf-as-string"),
        pytest.param({"iat": [int(time.time())]}, id="iat-as-list"),
        pytest.param({"sub": 42}, id="sub-as-number"),
    ],
)
def test_a_token_whose_claims_have_the_wrong_type_is_refused_with_401(
    server: ServerProcess, changes: dict[str, Any]
) -> None:
    token = _token(server, **changes)
    response = httpx.post(server.url, json=PING, headers={**HEADERS, "authorization": f"Bearer {token}"})

    assert response.status_code == 401
    assert 'error="invalid_token"' in response.headers["www-authenticate"]
    assert response.json()["error"]["code"] == -32000
    assert token not in server.log_text()


def test_the_same_token_with_numeric_claims_is_accepted(server: ServerProcess) -> None:
    token = _token(server)
    response = httpx.post(server.url, json=PING, headers={**HEADERS, "authorization": f"Bearer {token}"})

    assert response.status_code == 200
