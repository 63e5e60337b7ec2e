"""Unauthenticated traffic tries to drive the IdP through token introspection (issue 12).

Before: with `auth.introspection_url` set, every request carrying a random opaque token made one
RFC 7662 call, so anyone could load the corporate IdP through the service. Now each replica spends
from a budget of IdP calls (`auth.introspection_rate_per_second` + `auth.introspection_rate_burst`),
remembers inactive tokens by digest (`auth.introspection_negative_cache_seconds`), and lets
concurrent requests with the same unknown token share one call. While the budget is spent an
unknown token gets 503 + Retry-After, -32006, and costs the IdP nothing; a token already known keeps
working. Each test counts the calls at the IdP stand-in (tests/support/idp.py), a real uvicorn.
"""

from __future__ import annotations

import json
import math
import secrets
import socket
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest

from tests.support.idp import IdentityProvider, running_idp
from tests.support.redaction import remember_secret
from tests.support.server import ServerProcess, start_server
from tests.support.wait import until

ATTACK_REQUESTS = 1000
ATTACKERS = 25
ATTACK_RATE = 2.0
ATTACK_BURST = 10
SHARED = 20
ANSWER_SECONDS = 30.0
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}


@pytest.fixture(scope="module")
def idp() -> Iterator[IdentityProvider]:
    with running_idp() as provider:
        yield provider


def service_env(idp: IdentityProvider, *, rate: float, burst: int) -> dict[str, str]:
    return {
        **idp.service_env(),
        "AQL_MCP_AUTH__JWKS_URL": idp.jwks_url,
        "AQL_MCP_AUTH__ISSUER": idp.issuer,
        "AQL_MCP_AUTH__AUDIENCE": idp.audience,
        "AQL_MCP_AUTH__INTROSPECTION_CACHE_SECONDS": "600",
        "AQL_MCP_AUTH__INTROSPECTION_NEGATIVE_CACHE_SECONDS": "600",
        "AQL_MCP_AUTH__INTROSPECTION_RATE_PER_SECOND": str(rate),
        "AQL_MCP_AUTH__INTROSPECTION_RATE_BURST": str(burst),
    }


@pytest.fixture(scope="module")
def attacked(idp: IdentityProvider, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A replica with a small budget of IdP calls: 2 per second, 10 at once."""
    env = service_env(idp, rate=ATTACK_RATE, burst=ATTACK_BURST)
    with start_server(tmp_path_factory.mktemp("attacked"), env=env, dev=False) as server:
        yield server


@pytest.fixture(scope="module")
def steady(idp: IdentityProvider, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A replica whose budget these tests never spend, to watch the cache and the shared calls alone."""
    env = service_env(idp, rate=1000, burst=1000)
    with start_server(tmp_path_factory.mktemp("steady"), env=env, dev=False) as server:
        yield server


@pytest.fixture(autouse=True)
def idp_answers(idp: IdentityProvider) -> Iterator[None]:
    yield
    idp.release_introspection()
    idp.introspection_status = 200


def ping(server: ServerProcess, token: str) -> httpx.Response:
    headers = {**HEADERS, "authorization": f"Bearer {token}"}
    return httpx.post(server.url, json=PING, headers=headers, timeout=ANSWER_SECONDS)


def random_token() -> str:
    return "opq_" + secrets.token_urlsafe(32)


def assert_retry_later(response: httpx.Response) -> None:
    """The documented refusal while the budget is spent or the IdP is down: the token is not judged."""
    assert response.status_code == 503
    assert int(response.headers["retry-after"]) >= 1
    assert "www-authenticate" not in response.headers, "a client would drop a token that may be good"
    assert response.json()["error"]["code"] == -32006


def assert_invalid_token(response: httpx.Response) -> None:
    assert response.status_code == 401
    assert 'error="invalid_token"' in response.headers["www-authenticate"]


def assert_not_logged(server: ServerProcess, tokens: list[str]) -> None:
    log = server.log_text()
    assert not [token for token in tokens if token in log], "a token reached the server log"


def metric(server: ServerProcess, name: str, label: str) -> float:
    text = httpx.get(f"{server.base}/metrics", timeout=ANSWER_SECONDS).text
    line = next(line for line in text.splitlines() if line.startswith(f"{name}{{{label}}}"))
    return float(line.rsplit(" ", 1)[1])


async def attack(server: ServerProcess, tokens: list[str]) -> list[httpx.Response]:
    answers: list[httpx.Response] = []
    queue = iter(tokens)
    limits = httpx.Limits(max_connections=ATTACKERS)
    async with httpx.AsyncClient(timeout=ANSWER_SECONDS, limits=limits) as http:

        async def attacker() -> None:
            for token in queue:
                headers = {**HEADERS, "authorization": f"Bearer {token}"}
                answers.append(await http.post(server.url, json=PING, headers=headers))

        async with anyio.create_task_group() as group:
            for _ in range(ATTACKERS):
                group.start_soon(attacker)
    return answers


def test_a_thousand_random_opaque_tokens_cost_the_idp_at_most_the_budget(
    attacked: ServerProcess, idp: IdentityProvider
) -> None:
    known = remember_secret(idp.issue_opaque(sub="known"))
    assert ping(attacked, known).status_code == 200
    tokens = [random_token() for _ in range(ATTACK_REQUESTS)]

    started = time.monotonic()
    answers = anyio.run(attack, attacked, tokens)
    elapsed = time.monotonic() - started

    calls = sum(idp.introspections[token] for token in tokens)
    statuses = Counter(answer.status_code for answer in answers)
    assert set(statuses) <= {401, 503}, statuses
    # The bucket holds `burst` calls and refills at `rate` per second, whatever the attack's speed.
    assert calls <= ATTACK_BURST + math.ceil(ATTACK_RATE * elapsed)
    # Every token judged cost exactly one call; every other one none.
    assert calls == statuses[401]
    for answer in answers:
        (assert_invalid_token if answer.status_code == 401 else assert_retry_later)(answer)
    assert metric(attacked, "aql_mcp_limit_events_total", 'kind="introspection"') == statuses[503]
    assert metric(attacked, "aql_mcp_introspection_calls_total", 'result="inactive"') >= calls

    # A token the replica already knows keeps working, without asking the IdP again.
    assert ping(attacked, known).status_code == 200
    assert idp.introspections[known] == 1
    # A new legitimate token gets the documented 503 + Retry-After while the budget is spent, and
    # works once it refills.
    fresh = remember_secret(idp.issue_opaque(sub="fresh"))
    seen: list[httpx.Response] = []
    until(lambda: seen.append(ping(attacked, fresh)) or seen[-1].status_code == 200, "the new token never worked")
    for refused in seen[:-1]:
        assert_retry_later(refused)
    assert_not_logged(attacked, [*tokens, known, fresh])


def test_the_same_unknown_token_repeated_asks_the_idp_once(steady: ServerProcess, idp: IdentityProvider) -> None:
    token = random_token()

    for _ in range(20):
        assert_invalid_token(ping(steady, token))

    assert idp.introspections[token] == 1
    assert_not_logged(steady, [token])


def send_raw(port: int, token: str) -> socket.socket:
    """A complete request written to the kernel before this returns; the answer is read later."""
    body = json.dumps(PING).encode()
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    sock = socket.create_connection(("127.0.0.1", port), timeout=ANSWER_SECONDS)
    sock.sendall(head.encode() + body)
    return sock


def read_status(sock: socket.socket) -> int:
    with sock:
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return int(data.split(b" ", 2)[1])


def test_concurrent_requests_with_one_unknown_token_share_one_idp_call_and_a_failure_is_not_cached(
    steady: ServerProcess, idp: IdentityProvider
) -> None:
    """The IdP fails while it holds the call: a failure is never remembered, so only the shared call
    explains a single IdP request for twenty concurrent ones."""
    token, sentinel = random_token(), random_token()
    idp.introspection_status = 503
    idp.hold_introspection()
    sockets = [send_raw(steady.port, token) for _ in range(SHARED)]
    # Sent after the twenty: once the IdP sees it, the replica has taken up all of them.
    sockets.append(send_raw(steady.port, sentinel))
    assert idp.wait_for_introspection(lambda calls: calls[sentinel] == 1, ANSWER_SECONDS)
    idp.release_introspection()

    statuses = [read_status(sock) for sock in sockets]

    assert statuses == [503] * (SHARED + 1)
    assert idp.introspections[token] == 1
    idp.introspection_status = 200
    assert_invalid_token(ping(steady, token))
    assert idp.introspections[token] == 2, "the failure was remembered as inactive"
    assert_not_logged(steady, [token, sentinel])


def test_a_token_checked_while_the_idp_is_down_works_once_it_is_back(
    steady: ServerProcess, idp: IdentityProvider
) -> None:
    token = remember_secret(idp.issue_opaque())
    idp.introspection_status = 500

    assert_retry_later(ping(steady, token))

    idp.introspection_status = 200
    assert ping(steady, token).status_code == 200
    assert idp.introspections[token] == 2


def test_jwt_shaped_tokens_never_reach_introspection_when_the_jwks_verifies_jwts(
    steady: ServerProcess, idp: IdentityProvider, tmp_path: Path
) -> None:
    forged = idp.mint(key=idp.add_key("RS256").private, kid=idp.key("RS256").kid)
    unknown_kid = idp.mint(headers={"kid": "no-such-key"})
    shaped = [f"{secrets.token_urlsafe(12)}.{secrets.token_urlsafe(12)}.{secrets.token_urlsafe(12)}" for _ in range(20)]
    calls = idp.introspection_calls()

    for token in [forged, unknown_kid, *shaped]:
        assert_invalid_token(ping(steady, token))

    assert idp.introspection_calls() == calls
    valid = remember_secret(idp.mint())
    assert ping(steady, valid).status_code == 200
    assert idp.introspection_calls() == calls
