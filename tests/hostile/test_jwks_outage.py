"""The IdP's key set is out of reach: a JWT cannot be judged, so it is not called invalid (issue 15).

With no usable JWKS (never fetched, or older than `auth.jwks_max_stale_seconds`) a 401
`invalid_token` would make a client discard a token that may be good. The service answers as when
introspection cannot ask the IdP: 503 + Retry-After with -32006 (corporate Appendix B, "a dependency
is unavailable"), counted as the auth failure reason `unavailable`, which AqlMcpAuthUnavailable
alerts on.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from aql_mcp.exceptions import UPSTREAM_UNAVAILABLE
from tests.support.idp import IdentityProvider, running_idp
from tests.support.server import ServerProcess, start_server
from tests.support.wait import until

PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}


@pytest.fixture
def idp() -> Iterator[IdentityProvider]:
    with running_idp() as provider:
        yield provider


@pytest.fixture
def server(idp: IdentityProvider, tmp_path: Path) -> Iterator[ServerProcess]:
    """Production mode on the IdP double, whose JWKS answers 500 from the start: no key set ever."""
    idp.answer_status = 500
    env = {
        "AQL_MCP_AUTH__JWKS_URL": idp.jwks_url,
        "AQL_MCP_AUTH__ISSUER": idp.issuer,
        "AQL_MCP_AUTH__AUDIENCE": idp.audience,
        "AQL_MCP_AUTH__ALLOW_INSECURE_HTTP": "true",
        # While failing, the refresher retries every min(ttl / 2, 30) seconds: 5 here.
        "AQL_MCP_AUTH__JWKS_TTL_SECONDS": "10",
    }
    with start_server(tmp_path, env=env, dev=False) as running:
        yield running


def unavailable_failures(server: ServerProcess) -> float:
    text = httpx.get(f"{server.base}/metrics", timeout=5).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "aql_mcp_auth_failures_total" and sample.labels.get("reason") == "unavailable":
                return sample.value
    return 0.0


def test_a_jwt_while_no_key_set_is_usable_gets_503_with_retry_after_not_401(
    idp: IdentityProvider, server: ServerProcess
) -> None:
    token = idp.mint()
    headers = {"authorization": f"Bearer {token}", "accept": "application/json, text/event-stream"}

    answer = httpx.post(server.url, json=PING, headers=headers, timeout=10)

    assert answer.status_code == 503
    assert answer.headers["retry-after"].isdigit()
    assert "www-authenticate" not in answer.headers  # not a verdict on the token
    error = answer.json()["error"]
    assert error["code"] == UPSTREAM_UNAVAILABLE
    assert error["data"]["retryAfter"] == int(answer.headers["retry-after"])
    for leak in (token, "Traceback", idp.jwks_url, "/src/"):
        assert leak not in answer.text
    assert unavailable_failures(server) >= 1


def test_the_same_token_is_accepted_once_the_key_set_is_back(idp: IdentityProvider, server: ServerProcess) -> None:
    headers = {"authorization": f"Bearer {idp.mint()}", "accept": "application/json, text/event-stream"}
    assert httpx.post(server.url, json=PING, headers=headers, timeout=10).status_code == 503

    idp.answer_status = 200

    until(
        lambda: httpx.post(server.url, json=PING, headers=headers, timeout=10).status_code == 200,
        "the token was not accepted after the key set came back",
        seconds=30,
    )
