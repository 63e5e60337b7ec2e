"""Opaque bearer tokens (corporate Appendix A.3): an allow-list of digests, or RFC 7662 introspection.

The introspection endpoint is a real Starlette app on uvicorn in a background thread; the
service's own `httpx.AsyncClient` calls it over HTTP with its client credentials.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from aql_mcp.auth.introspection import IntrospectionLimits, Introspector
from aql_mcp.auth.opaque import OpaqueTokens, read_allow_list
from aql_mcp.auth.principal import Principal
from aql_mcp.auth.tokens import BearerVerifier
from aql_mcp.exceptions import ConfigError, InvalidToken, UpstreamUnavailable
from tests.support.asgi import MCP_HEADERS, asgi_client, dev_settings, initialize_params, rpc

pytestmark = pytest.mark.anyio

CLIENT_ID = "aql-mcp"
CLIENT_SECRET = "introspection-" + secrets.token_hex(8)
CACHE_SECONDS = 60.0
NEGATIVE_CACHE_SECONDS = 10.0
STARTUP_SECONDS = 10.0
UNREACHABLE = "http://127.0.0.1:9/introspect"  # the discard port: connection refused


def sha256(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def opaque_token() -> str:
    return "opq_" + secrets.token_urlsafe(32)


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass(frozen=True)
class Call:
    authorization: str | None
    content_type: str | None
    form: dict[str, list[str]]


@dataclass
class IntrospectionEndpoint:
    """An RFC 7662 endpoint: client authentication by HTTP Basic, `token` in a form body."""

    url: str
    answers: dict[str, dict[str, Any]] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)
    status: int = 200
    raw_body: bytes | None = None

    def calls_for(self, token: str) -> int:
        return sum(1 for call in self.calls if call.form.get("token") == [token])

    async def introspect(self, request: Request) -> Response:
        form = parse_qs((await request.body()).decode("ascii"))
        self.calls.append(Call(request.headers.get("authorization"), request.headers.get("content-type"), form))
        credentials = base64.b64encode(f"{CLIENT_ID}:{CLIENT_SECRET}".encode()).decode()
        if request.headers.get("authorization") != f"Basic {credentials}":
            # RFC 7662 §2.3: a caller that cannot authenticate gets 401.
            return JSONResponse({"error": "invalid_client"}, status_code=401)
        if self.status != 200:
            return JSONResponse({"error": "temporarily_unavailable"}, status_code=self.status)
        if self.raw_body is not None:
            return Response(self.raw_body, media_type="application/json")
        token = form.get("token", [""])[0]
        return JSONResponse(self.answers.get(token, {"active": False}))


@pytest.fixture(scope="module")
def served() -> Iterator[IntrospectionEndpoint]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    endpoint = IntrospectionEndpoint(url=f"http://127.0.0.1:{sock.getsockname()[1]}/introspect")
    app = Starlette(routes=[Route("/introspect", endpoint.introspect, methods=["POST"])])
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + STARTUP_SECONDS
    while not server.started and thread.is_alive() and time.monotonic() < deadline:
        thread.join(timeout=0.01)
    assert server.started, "the introspection endpoint did not start"
    try:
        yield endpoint
    finally:
        server.should_exit = True
        thread.join(timeout=STARTUP_SECONDS)
        sock.close()


@pytest.fixture
def endpoint(served: IntrospectionEndpoint) -> Iterator[IntrospectionEndpoint]:
    yield served
    served.answers.clear()
    served.calls.clear()
    served.status = 200
    served.raw_body = None


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=5.0) as client:
        yield client


@pytest.fixture
def clock() -> Clock:
    return Clock()


def introspector(
    url: str, http: httpx.AsyncClient, clock: Clock, *, secret: str = CLIENT_SECRET, cache: float = CACHE_SECONDS
) -> Introspector:
    limits = IntrospectionLimits(cache_seconds=cache, negative_seconds=NEGATIVE_CACHE_SECONDS)
    return Introspector(url, client=http, client_id=CLIENT_ID, client_secret=secret, limits=limits, clock=clock)


def active(clock: Clock, **changes: Any) -> dict[str, Any]:
    answer: dict[str, Any] = {"active": True, "sub": "robot", "scope": "mcp read", "exp": int(clock.now) + 600}
    answer.update(changes)
    return {k: v for k, v in answer.items() if v is not None}


# Allow-list ------------------------------------------------------------------------------------


async def test_an_allow_listed_token_is_found_by_its_digest() -> None:
    token = opaque_token()
    tokens = OpaqueTokens({sha256(token): ("robot", ("mcp", "read"))})

    assert tokens.lookup(token) == Principal(subject="robot", scopes=frozenset({"mcp", "read"}))
    assert tokens.lookup(opaque_token()) is None
    assert len(tokens) == 1


async def test_the_allow_list_holds_digests_and_never_needs_the_token() -> None:
    """Appendix A.3: the configuration carries no secret; knowing the digest is not knowing the token."""
    token = opaque_token()
    entries = {sha256(token): ("robot", ("mcp",))}
    del token  # from here on only the digest is known

    tokens = OpaqueTokens(entries)
    (digest,) = entries

    assert tokens.lookup(digest) is None
    assert tokens.lookup(digest.upper()) is None


async def test_the_verifier_accepts_an_allow_listed_opaque_token_without_introspection(
    endpoint: IntrospectionEndpoint, http: httpx.AsyncClient, clock: Clock
) -> None:
    token = opaque_token()
    verifier = BearerVerifier(
        issuer="https://idp.test",
        audience="https://aql-mcp.test/mcp",
        opaque=OpaqueTokens({sha256(token): ("robot", ("mcp",))}),
        introspector=introspector(endpoint.url, http, clock),
    )

    principal = await verifier.verify(token)

    assert principal.subject == "robot"
    assert endpoint.calls == []


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


async def test_an_allow_list_file_maps_digests_to_subjects_and_scopes(tmp_path: Path) -> None:
    robot, batch = opaque_token(), opaque_token()
    path = write(
        tmp_path / "tokens.yaml",
        f"{sha256(robot)}:\n  sub: robot\n  scopes: [mcp, read]\n{sha256(batch).upper()}:\n  sub: batch\n",
    )

    entries = read_allow_list(path)

    assert entries == {sha256(robot): ("robot", ("mcp", "read")), sha256(batch): ("batch", ())}
    assert OpaqueTokens(entries).lookup(batch) == Principal(subject="batch")


async def test_an_allow_list_file_may_be_json(tmp_path: Path) -> None:
    token = opaque_token()
    path = write(tmp_path / "tokens.json", f'{{"{sha256(token)}": {{"sub": "robot", "scopes": ["mcp"]}}}}')

    assert read_allow_list(path) == {sha256(token): ("robot", ("mcp",))}


async def test_an_empty_allow_list_file_allows_no_token(tmp_path: Path) -> None:
    assert read_allow_list(write(tmp_path / "tokens.yaml", "")) == {}


DIGEST = "ab" * 32
REFUSED = {
    "unreadable": None,
    "not-yaml": "{: [",
    "short-key": "abc123:\n  sub: robot\n",
    "value-not-a-mapping": f"{DIGEST}: robot\n",
    "no-sub": f"{DIGEST}:\n  scopes: [mcp]\n",
    "sub-not-a-string": f"{DIGEST}:\n  sub: [robot]\n",
}


@pytest.mark.parametrize("case", REFUSED)
async def test_a_malformed_allow_list_file_is_refused_naming_the_setting(tmp_path: Path, case: str) -> None:
    text = REFUSED[case]
    path = tmp_path / "tokens.yaml" if text is None else write(tmp_path / "tokens.yaml", text)

    with pytest.raises(ConfigError, match="AQL_MCP_AUTH__OPAQUE_TOKENS_FILE"):
        read_allow_list(path)


async def test_an_allow_list_file_that_is_a_list_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path / "tokens.yaml", f"- {DIGEST}\n")

    with pytest.raises(ConfigError, match="AQL_MCP_AUTH__OPAQUE_TOKENS_FILE"):
        read_allow_list(path)


async def test_an_allow_list_key_that_is_not_hex_is_refused(tmp_path: Path) -> None:
    """A 64-character token pasted instead of its digest would put the secret in the file and never match."""
    path = write(tmp_path / "tokens.yaml", f"{'opq_' + 'x' * 60}:\n  sub: robot\n")

    with pytest.raises(ConfigError, match="AQL_MCP_AUTH__OPAQUE_TOKENS_FILE"):
        read_allow_list(path)


async def test_allow_list_scopes_given_as_a_string_are_refused(tmp_path: Path) -> None:
    path = write(tmp_path / "tokens.yaml", f"{DIGEST}:\n  sub: robot\n  scopes: mcp\n")

    with pytest.raises(ConfigError, match="AQL_MCP_AUTH__OPAQUE_TOKENS_FILE"):
        read_allow_list(path)


# Introspection (RFC 7662) ----------------------------------------------------------------------


async def test_an_active_token_becomes_a_principal_with_its_scopes_and_expiry(
    endpoint: IntrospectionEndpoint, http: httpx.AsyncClient, clock: Clock
) -> None:
    token = opaque_token()
    endpoint.answers[token] = active(clock)

    principal = await introspector(endpoint.url, http, clock).introspect(token)

    assert principal.subject == "robot"
    assert principal.scopes == frozenset({"mcp", "read"})
    assert principal.expires_at == int(clock.now) + 600


async def test_introspection_authenticates_with_http_basic_and_posts_the_token_as_a_form(
    endpoint: IntrospectionEndpoint, http: httpx.AsyncClient, clock: Clock
) -> None:
    """RFC 7662 §2.1: POST, `application/x-www-form-urlencoded`, `token` (and a type hint); the caller authenticates."""
    token = opaque_token()
    endpoint.answers[token] = active(clock)

    await introspector(endpoint.url, http, clock).introspect(token)

    (call,) = endpoint.calls
    expected = base64.b64encode(f"{CLIENT_ID}:{CLIENT_SECRET}".encode()).decode()
    assert call.authorization == f"Basic {expected}"
    assert (call.content_type or "").startswith("application/x-www-form-urlencoded")
    assert call.form == {"token": [token], "token_type_hint": ["access_token"]}


INACTIVE: dict[str, dict[str, Any] | None] = {
    "inactive": {"active": False},
    "unknown-to-the-idp": None,
    "active-without-sub": {"active": True, "scope": "mcp"},
    "active-as-a-string": {"active": "true", "sub": "robot"},
    "expired": {"active": True, "sub": "robot", "exp": 1},
}


@pytest.mark.parametrize("case", INACTIVE)
async def test_a_token_the_idp_does_not_vouch_for_is_invalid(
    endpoint: IntrospectionEndpoint, http: httpx.AsyncClient, clock: Clock, case: str
) -> None:
    token = opaque_token()
    answer = INACTIVE[case]
    if answer is not None:
        endpoint.answers[token] = answer

    with pytest.raises(InvalidToken):
        await introspector(endpoint.url, http, clock).introspect(token)


async def test_an_active_answer_is_reused_from_the_cache(
    endpoint: IntrospectionEndpoint, http: httpx.AsyncClient, clock: Clock
) -> None:
    token = opaque_token()
    endpoint.answers[token] = active(clock)
    checker = introspector(endpoint.url, http, clock)

    first = await checker.introspect(token)
    clock.advance(CACHE_SECONDS - 1)
    second = await checker.introspect(token)

    assert first == second
    assert endpoint.calls_for(token) == 1
    clock.advance(1)
    await checker.introspect(token)
    assert endpoint.calls_for(token) == 2


async def test_a_cached_answer_never_outlives_the_tokens_expiry(
    endpoint: IntrospectionEndpoint, http: httpx.AsyncClient, clock: Clock
) -> None:
    token = opaque_token()
    endpoint.answers[token] = active(clock, exp=int(clock.now) + 5)
    checker = introspector(endpoint.url, http, clock)
    await checker.introspect(token)

    clock.advance(6)

    with pytest.raises(InvalidToken):
        await checker.introspect(token)
    assert endpoint.calls_for(token) == 2


async def test_a_negative_answer_is_cached_briefly(
    endpoint: IntrospectionEndpoint, http: httpx.AsyncClient, clock: Clock
) -> None:
    token = opaque_token()
    checker = introspector(endpoint.url, http, clock)

    for _ in range(3):
        with pytest.raises(InvalidToken):
            await checker.introspect(token)
    assert endpoint.calls_for(token) == 1

    endpoint.answers[token] = active(clock)
    clock.advance(NEGATIVE_CACHE_SECONDS)
    principal = await checker.introspect(token)

    assert principal.subject == "robot"
    assert endpoint.calls_for(token) == 2
    assert NEGATIVE_CACHE_SECONDS < CACHE_SECONDS


async def test_a_token_revoked_at_the_idp_is_refused_once_the_introspection_cache_runs_out(
    endpoint: IntrospectionEndpoint, http: httpx.AsyncClient, clock: Clock
) -> None:
    """`auth.introspection_cache_seconds` is how long an answer is reused; revocation must show after it."""
    token = opaque_token()
    endpoint.answers[token] = active(clock)
    verifier = BearerVerifier(
        issuer="https://idp.test",
        audience="https://aql-mcp.test/mcp",
        introspector=introspector(endpoint.url, http, clock),
        clock=clock,
    )
    await verifier.verify(token)

    endpoint.answers[token] = {"active": False}
    clock.advance(CACHE_SECONDS + 1)

    with pytest.raises(InvalidToken):
        await verifier.verify(token)


def fail_unreachable(endpoint: IntrospectionEndpoint) -> str:
    return UNREACHABLE


def fail_500(endpoint: IntrospectionEndpoint) -> str:
    endpoint.status = 500
    return endpoint.url


def fail_garbage(endpoint: IntrospectionEndpoint) -> str:
    endpoint.raw_body = b"<html>not json"
    return endpoint.url


FAILURES = {"unreachable": fail_unreachable, "500": fail_500, "garbage": fail_garbage}


@pytest.mark.parametrize("failure", FAILURES)
async def test_an_introspection_endpoint_that_fails_is_upstream_unavailable_not_an_invalid_token(
    endpoint: IntrospectionEndpoint, http: httpx.AsyncClient, clock: Clock, failure: str
) -> None:
    """Appendix B: a dependency that is down is -32006 / HTTP 503; the token is not judged."""
    url = FAILURES[failure](endpoint)

    with pytest.raises(UpstreamUnavailable) as caught:
        await introspector(url, http, clock).introspect(opaque_token())

    assert (caught.value.status, caught.value.code) == (503, -32006)


async def test_wrong_client_credentials_are_upstream_unavailable(
    endpoint: IntrospectionEndpoint, http: httpx.AsyncClient, clock: Clock
) -> None:
    token = opaque_token()
    endpoint.answers[token] = active(clock)

    with pytest.raises(UpstreamUnavailable):
        await introspector(endpoint.url, http, clock, secret="wrong").introspect(token)


async def test_a_failed_introspection_is_not_cached(
    endpoint: IntrospectionEndpoint, http: httpx.AsyncClient, clock: Clock
) -> None:
    token = opaque_token()
    endpoint.answers[token] = active(clock)
    endpoint.status = 503
    checker = introspector(endpoint.url, http, clock)
    with pytest.raises(UpstreamUnavailable):
        await checker.introspect(token)

    endpoint.status = 200

    assert (await checker.introspect(token)).subject == "robot"


# Through the app -------------------------------------------------------------------------------


def introspection_settings(tmp_path: Path, url: str) -> Any:
    return dev_settings(
        tmp_path,
        auth={
            "introspection_url": url,
            "introspection_client_id": CLIENT_ID,
            "introspection_client_secret": CLIENT_SECRET,
        },
    )


async def test_the_service_accepts_an_opaque_token_its_idp_vouches_for(
    endpoint: IntrospectionEndpoint, tmp_path: Path
) -> None:
    token = opaque_token()
    endpoint.answers[token] = {"active": True, "sub": "robot", "scope": "mcp", "exp": int(time.time()) + 600}
    headers = {**MCP_HEADERS, "authorization": f"Bearer {token}"}

    async with asgi_client(introspection_settings(tmp_path, endpoint.url)) as http:
        response = await http.post("/mcp", json=rpc("initialize", initialize_params()), headers=headers)

    assert response.status_code == 200
    assert "mcp-session-id" in response.headers


async def test_the_service_answers_503_when_its_introspection_endpoint_is_down(tmp_path: Path) -> None:
    """Appendix B: upstream unavailable is -32006 / HTTP 503, not a 401 that would make the client drop its token."""
    headers = {**MCP_HEADERS, "authorization": f"Bearer {opaque_token()}"}

    async with asgi_client(introspection_settings(tmp_path, UNREACHABLE)) as http:
        response = await http.post("/mcp", json=rpc("initialize", initialize_params()), headers=headers)

    assert response.status_code == 503
    assert response.json()["error"]["code"] == -32006
    assert "www-authenticate" not in response.headers
