"""RFC 7662 introspection of opaque tokens (corporate Appendix A.3): the call, the answer, the caches,
and the guards around them (negative cache, single flight, the budget of IdP calls).

The IdP is the stand-in of tests/support/idp.py on a real uvicorn; the introspector calls it over
HTTP with its own client. Clocks are fakes, so cache lifetimes and the budget's refill are exact.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import secrets
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from aql_mcp.auth.dev_issuer import DevIssuer
from aql_mcp.auth.jwks import SigningKey
from aql_mcp.auth.opaque import OpaqueTokens
from aql_mcp.auth.token_introspection import IntrospectionLimits, Introspector
from aql_mcp.auth.tokens import BearerVerifier
from aql_mcp.exceptions import IntrospectionBudgetSpent, InvalidToken, UpstreamUnavailable
from tests.support.asgi import MCP_HEADERS, asgi_client, dev_settings, initialize_params, rpc
from tests.support.clock import Clock
from tests.support.idp import INTROSPECTION_CLIENT_ID, IdentityProvider, running_idp
from tests.support.wait import eventually

pytestmark = pytest.mark.anyio

SETTLE_SECONDS = 10.0
UNREACHABLE = "http://127.0.0.1:9/introspect"  # the discard port: connection refused


@pytest.fixture(scope="module")
def served() -> Iterator[IdentityProvider]:
    with running_idp() as provider:
        yield provider


@pytest.fixture
def idp(served: IdentityProvider) -> Iterator[IdentityProvider]:
    yield served
    served.reset_introspection()


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=5.0) as client:
        yield client


@pytest.fixture
def clock() -> Clock:
    return Clock(time.time())


@pytest.fixture
def monotonic() -> Clock:
    return Clock(1000.0)


class Events:
    def __init__(self) -> None:
        self.calls: list[str] = []
        self.refusals: list[str] = []


def introspector(
    idp: IdentityProvider,
    http: httpx.AsyncClient,
    clock: Clock,
    monotonic: Clock,
    events: Events | None = None,
    **limits: float,
) -> Introspector:
    events = events or Events()
    return Introspector(
        idp.introspection_url,
        client=http,
        client_id=INTROSPECTION_CLIENT_ID,
        client_secret=idp.introspection_secret,
        limits=IntrospectionLimits(**limits),  # type: ignore[arg-type]
        clock=clock,
        monotonic=monotonic,
        on_call=events.calls.append,
        on_refusal=events.refusals.append,
    )


def random_token() -> str:
    return "opq_" + secrets.token_urlsafe(32)


async def refused(checker: Introspector, token: str) -> None:
    with pytest.raises(InvalidToken):
        await checker.introspect(token)


def active(clock: Clock, **changes: Any) -> dict[str, Any]:
    answer: dict[str, Any] = {"active": True, "sub": "robot", "scope": "mcp read", "exp": int(clock.now) + 600}
    answer.update(changes)
    return {k: v for k, v in answer.items() if v is not None}


# The call and its answer --------------------------------------------------------------------------


OURS = "https://mcp.example.test/mcp"


@pytest.mark.parametrize(
    ("aud", "accepted"),
    [
        (None, True),
        (OURS, True),
        (["https://other.example.test", OURS], True),
        ("https://other.example.test", False),
        (["https://other.example.test"], False),
        ([], False),
        (42, False),
    ],
)
async def test_an_answer_naming_another_audience_is_refused(
    idp: IdentityProvider, http: httpx.AsyncClient, clock: Clock, monotonic: Clock, aud: Any, accepted: bool
) -> None:
    """RFC 7662 §4: a token the IdP issued for another resource server is not good here, although the
    IdP calls it active. An answer without `aud` is the IdP's word to the resource server that asked."""
    token = random_token()
    idp.answer_introspection(token, active(clock, aud=aud))
    checker = Introspector(
        idp.introspection_url,
        client=http,
        client_id=INTROSPECTION_CLIENT_ID,
        client_secret=idp.introspection_secret,
        limits=IntrospectionLimits(),
        clock=clock,
        monotonic=monotonic,
        audiences=(OURS,),
    )

    if accepted:
        assert (await checker.introspect(token)).subject == "robot"
    else:
        await refused(checker, token)


async def test_an_active_token_becomes_a_principal_with_its_scopes_and_expiry(
    idp: IdentityProvider, http: httpx.AsyncClient, clock: Clock, monotonic: Clock
) -> None:
    token = random_token()
    idp.answer_introspection(token, active(clock))

    principal = await introspector(idp, http, clock, monotonic).introspect(token)

    assert principal.subject == "robot"
    assert principal.scopes == frozenset({"mcp", "read"})
    assert principal.expires_at == int(clock.now) + 600


async def test_a_client_credentials_token_without_sub_has_its_client_as_subject(
    idp: IdentityProvider, http: httpx.AsyncClient, clock: Clock, monotonic: Clock
) -> None:
    """RFC 7662 makes `sub` optional; oidc-provider leaves it out for a client's own token and names the
    client, which its JWTs carry as `sub` (RFC 9068 §2.2). A `sub` that is there still wins."""
    own, delegated = random_token(), random_token()
    idp.answer_introspection(own, active(clock, sub=None, client_id="agent"))
    idp.answer_introspection(delegated, active(clock, client_id="agent"))
    checker = introspector(idp, http, clock, monotonic)

    assert (await checker.introspect(own)).subject == "agent"
    assert (await checker.introspect(delegated)).subject == "robot"


async def test_introspection_authenticates_with_http_basic_and_posts_the_token_as_a_form(
    idp: IdentityProvider, http: httpx.AsyncClient, clock: Clock, monotonic: Clock
) -> None:
    """RFC 7662 §2.1: POST, `application/x-www-form-urlencoded`, `token` (and a type hint); the caller authenticates."""
    token = idp.issue_opaque()

    await introspector(idp, http, clock, monotonic).introspect(token)

    (call,) = idp.introspection_requests
    expected = base64.b64encode(f"{INTROSPECTION_CLIENT_ID}:{idp.introspection_secret}".encode()).decode()
    assert call.authorization == f"Basic {expected}"
    assert (call.content_type or "").startswith("application/x-www-form-urlencoded")
    assert call.form == {"token": [token], "token_type_hint": ["access_token"]}


INACTIVE: dict[str, dict[str, Any] | None] = {
    "inactive": {"active": False},
    "unknown-to-the-idp": None,
    "active-without-sub": {"active": True, "scope": "mcp"},
    "active-with-a-numeric-client-id-only": {"active": True, "client_id": 7},
    "active-as-a-string": {"active": "true", "sub": "robot"},
    "expired": {"active": True, "sub": "robot", "exp": 1},
}


@pytest.mark.parametrize("case", INACTIVE)
async def test_a_token_the_idp_does_not_vouch_for_is_invalid(
    idp: IdentityProvider, http: httpx.AsyncClient, clock: Clock, monotonic: Clock, case: str
) -> None:
    """RFC 7662 §2.2: only `active: true` with a subject counts, and never past its `exp`."""
    token = random_token()
    idp.answer_introspection(token, INACTIVE[case])

    await refused(introspector(idp, http, clock, monotonic), token)


async def test_an_idp_answer_that_is_not_json_is_upstream_unavailable_not_an_invalid_token(
    idp: IdentityProvider, http: httpx.AsyncClient, clock: Clock, monotonic: Clock
) -> None:
    """Appendix B: a dependency that answers nonsense is -32006 / HTTP 503; the token is not judged."""
    idp.introspection_body = b"<html>not json"

    with pytest.raises(UpstreamUnavailable) as caught:
        await introspector(idp, http, clock, monotonic).introspect(idp.issue_opaque())

    assert (caught.value.status, caught.value.code) == (503, -32006)


async def test_wrong_client_credentials_are_upstream_unavailable(
    idp: IdentityProvider, http: httpx.AsyncClient, clock: Clock, monotonic: Clock
) -> None:
    """RFC 7662 §2.3: the IdP answers 401 to a caller it cannot authenticate; that says nothing of the token."""
    checker = Introspector(
        idp.introspection_url,
        client=http,
        client_id=INTROSPECTION_CLIENT_ID,
        client_secret="wrong",
        limits=IntrospectionLimits(),
        clock=clock,
        monotonic=monotonic,
    )

    with pytest.raises(UpstreamUnavailable):
        await checker.introspect(idp.issue_opaque())


# Positive cache ---------------------------------------------------------------------------------


async def test_an_active_answer_is_reused_from_the_cache(
    idp: IdentityProvider, http: httpx.AsyncClient, clock: Clock, monotonic: Clock
) -> None:
    token = random_token()
    idp.answer_introspection(token, active(clock))
    checker = introspector(idp, http, clock, monotonic, cache_seconds=60)

    first = await checker.introspect(token)
    clock.advance(59)
    second = await checker.introspect(token)

    assert first == second
    assert idp.introspections[token] == 1
    clock.advance(1)
    await checker.introspect(token)
    assert idp.introspections[token] == 2


async def test_a_cached_answer_never_outlives_the_tokens_expiry(
    idp: IdentityProvider, http: httpx.AsyncClient, clock: Clock, monotonic: Clock
) -> None:
    token = random_token()
    idp.answer_introspection(token, active(clock, exp=int(clock.now) + 5))
    checker = introspector(idp, http, clock, monotonic, cache_seconds=60)
    await checker.introspect(token)

    clock.advance(6)

    await refused(checker, token)
    assert idp.introspections[token] == 2


async def test_a_token_revoked_at_the_idp_is_refused_once_the_introspection_cache_runs_out(
    idp: IdentityProvider, http: httpx.AsyncClient, clock: Clock, monotonic: Clock
) -> None:
    """`auth.introspection_cache_seconds` is how long an answer is reused; revocation must show after it."""
    token = random_token()
    idp.answer_introspection(token, active(clock))
    verifier = BearerVerifier(
        issuer="https://idp.test",
        audience="https://aql-mcp.test/mcp",
        introspector=introspector(idp, http, clock, monotonic, cache_seconds=60),
        clock=clock,
    )
    await verifier.verify(token)

    idp.answer_introspection(token, {"active": False})
    clock.advance(61)

    with pytest.raises(InvalidToken):
        await verifier.verify(token)


# Negative cache ---------------------------------------------------------------------------------


async def test_an_inactive_token_is_refused_from_the_negative_cache_until_its_ttl_runs_out(
    idp: IdentityProvider, http: httpx.AsyncClient, clock: Clock, monotonic: Clock
) -> None:
    token = random_token()
    checker = introspector(idp, http, clock, monotonic, negative_seconds=30)

    for _ in range(5):
        await refused(checker, token)
    clock.advance(29)
    await refused(checker, token)
    assert idp.introspections[token] == 1

    clock.advance(1)
    await refused(checker, token)
    assert idp.introspections[token] == 2


async def test_a_negative_cache_of_zero_seconds_asks_every_time(
    idp: IdentityProvider, http: httpx.AsyncClient, clock: Clock, monotonic: Clock
) -> None:
    token = random_token()
    checker = introspector(idp, http, clock, monotonic, negative_seconds=0)

    await refused(checker, token)
    await refused(checker, token)

    assert idp.introspections[token] == 2


async def test_the_negative_cache_is_bounded_and_forgets_the_oldest_token_first(
    idp: IdentityProvider, http: httpx.AsyncClient, clock: Clock, monotonic: Clock
) -> None:
    """Random tokens cannot grow memory without limit: the cache holds `negative_size` digests."""
    tokens = [random_token() for _ in range(4)]
    checker = introspector(idp, http, clock, monotonic, negative_size=3)
    for token in tokens:
        await refused(checker, token)

    await refused(checker, tokens[3])
    await refused(checker, tokens[0])

    assert idp.introspections[tokens[3]] == 1
    assert idp.introspections[tokens[0]] == 2


@pytest.mark.parametrize("status", [500, 503, 401])
async def test_an_idp_failure_is_not_remembered_as_inactive(
    idp: IdentityProvider, http: httpx.AsyncClient, clock: Clock, monotonic: Clock, status: int
) -> None:
    token = idp.issue_opaque()
    events = Events()
    checker = introspector(idp, http, clock, monotonic, events)
    idp.introspection_status = status
    with pytest.raises(UpstreamUnavailable) as caught:
        await checker.introspect(token)
    assert caught.value.code == -32006

    idp.introspection_status = 200

    assert (await checker.introspect(token)).subject == "robot"
    assert idp.introspections[token] == 2
    assert events.calls == ["failed", "active"]


async def test_an_unreachable_idp_is_not_remembered_as_inactive(
    idp: IdentityProvider, http: httpx.AsyncClient, clock: Clock, monotonic: Clock
) -> None:
    token = random_token()
    events = Events()
    checker = Introspector(
        UNREACHABLE,
        client=http,
        client_id=INTROSPECTION_CLIENT_ID,
        client_secret="unused",
        limits=IntrospectionLimits(),
        clock=clock,
        monotonic=monotonic,
        on_call=events.calls.append,
    )

    for _ in range(2):
        with pytest.raises(UpstreamUnavailable):
            await checker.introspect(token)

    assert events.calls == ["failed", "failed"]


# Single flight --------------------------------------------------------------------------------


async def test_concurrent_requests_with_the_same_unknown_token_share_one_idp_call(
    idp: IdentityProvider, http: httpx.AsyncClient, clock: Clock, monotonic: Clock
) -> None:
    token = random_token()
    checker = introspector(idp, http, clock, monotonic, negative_seconds=0)
    idp.hold_introspection()

    waiting = [asyncio.ensure_future(checker.introspect(token)) for _ in range(20)]
    await eventually(lambda: idp.introspections[token] == 1, "the IdP was never asked")
    idp.release_introspection()
    outcomes = await asyncio.gather(*waiting, return_exceptions=True)

    assert all(isinstance(outcome, InvalidToken) for outcome in outcomes)
    assert idp.introspections[token] == 1


async def test_an_idp_failure_reaches_every_request_that_shared_the_call_and_the_next_one_asks_again(
    idp: IdentityProvider, http: httpx.AsyncClient, clock: Clock, monotonic: Clock
) -> None:
    token = idp.issue_opaque()
    checker = introspector(idp, http, clock, monotonic)
    idp.introspection_status = 503
    idp.hold_introspection()

    waiting = [asyncio.ensure_future(checker.introspect(token)) for _ in range(5)]
    await eventually(lambda: idp.introspections[token] == 1, "the IdP was never asked")
    idp.release_introspection()
    outcomes = await asyncio.gather(*waiting, return_exceptions=True)
    idp.introspection_status = 200

    assert all(isinstance(outcome, UpstreamUnavailable) for outcome in outcomes)
    assert (await checker.introspect(token)).subject == "robot"
    assert idp.introspections[token] == 2


async def test_a_caller_that_goes_away_does_not_cancel_the_call_others_wait_for(
    idp: IdentityProvider, http: httpx.AsyncClient, clock: Clock, monotonic: Clock
) -> None:
    token = idp.issue_opaque()
    checker = introspector(idp, http, clock, monotonic)
    idp.hold_introspection()

    first = asyncio.ensure_future(checker.introspect(token))
    second = asyncio.ensure_future(checker.introspect(token))
    await eventually(lambda: idp.introspections[token] == 1, "the IdP was never asked")
    first.cancel()
    idp.release_introspection()

    with anyio.fail_after(SETTLE_SECONDS):
        principal = await second
    assert principal.subject == "robot"
    assert first.cancelled()
    assert idp.introspections[token] == 1


# Budget -------------------------------------------------------------------------------------


async def test_when_the_budget_is_spent_an_unknown_token_is_503_with_retry_after_and_no_idp_call(
    idp: IdentityProvider, http: httpx.AsyncClient, clock: Clock, monotonic: Clock
) -> None:
    """Not 401: the token was not judged, and a client told `invalid_token` would drop a good token."""
    events = Events()
    checker = introspector(idp, http, clock, monotonic, events, rate_per_second=0.5, burst=2)
    for _ in range(2):
        await refused(checker, random_token())
    calls = idp.introspection_calls()

    with pytest.raises(IntrospectionBudgetSpent) as caught:
        await checker.introspect(random_token())

    error = caught.value
    assert (error.status, error.code) == (503, -32006)
    assert error.headers["retry-after"] == "2"
    assert error.data == {"retryAfter": 2}
    assert idp.introspection_calls() == calls
    assert events.refusals == ["introspection"]


async def test_a_known_token_keeps_working_while_the_budget_is_spent_and_a_new_one_once_it_refills(
    idp: IdentityProvider, http: httpx.AsyncClient, clock: Clock, monotonic: Clock
) -> None:
    known, new = idp.issue_opaque(sub="known"), idp.issue_opaque(sub="new")
    checker = introspector(idp, http, clock, monotonic, rate_per_second=1, burst=1)
    await checker.introspect(known)

    assert (await checker.introspect(known)).subject == "known"
    with pytest.raises(IntrospectionBudgetSpent):
        await checker.introspect(new)

    monotonic.advance(1)
    assert (await checker.introspect(new)).subject == "new"


async def test_cached_inactive_tokens_and_shared_calls_spend_nothing_from_the_budget(
    idp: IdentityProvider, http: httpx.AsyncClient, clock: Clock, monotonic: Clock
) -> None:
    token = random_token()
    checker = introspector(idp, http, clock, monotonic, rate_per_second=0.001, burst=1)
    idp.hold_introspection()
    waiting = [asyncio.ensure_future(checker.introspect(token)) for _ in range(3)]
    await eventually(lambda: idp.introspections[token] == 1, "the IdP was never asked")
    idp.release_introspection()
    await asyncio.gather(*waiting, return_exceptions=True)

    await refused(checker, token)

    assert idp.introspections[token] == 1


# Through the verifier ------------------------------------------------------------------------


async def test_the_verifier_accepts_an_allow_listed_opaque_token_without_introspection(
    idp: IdentityProvider, http: httpx.AsyncClient, clock: Clock, monotonic: Clock
) -> None:
    token = random_token()
    verifier = BearerVerifier(
        issuer="https://idp.test",
        audience="https://aql-mcp.test/mcp",
        opaque=OpaqueTokens({hashlib.sha256(token.encode()).hexdigest(): ("robot", ("mcp",))}),
        introspector=introspector(idp, http, clock, monotonic),
    )

    principal = await verifier.verify(token)

    assert principal.subject == "robot"
    assert idp.introspection_calls() == 0


async def test_a_jwt_shaped_token_never_reaches_introspection_when_a_key_source_verifies_jwts(
    idp: IdentityProvider, http: httpx.AsyncClient, clock: Clock, monotonic: Clock, tmp_path: Path
) -> None:
    signer = DevIssuer(state_dir=tmp_path, issuer="https://idp.test", audience="https://aql-mcp.test/mcp")
    verifier = BearerVerifier(
        issuer="https://idp.test",
        audience="https://aql-mcp.test/mcp",
        static_keys={signer.kid: SigningKey(signer.kid, "ES256", signer.public_key)},
        introspector=introspector(idp, http, clock, monotonic),
    )
    forged = idp.mint(claims={"iss": "https://idp.test", "aud": "https://aql-mcp.test/mcp"})
    shaped = "eyJhbGciOiJSUzI1NiJ9.e30." + secrets.token_urlsafe(16)

    for token in (forged, shaped, "a.b.c"):
        with pytest.raises(InvalidToken):
            await verifier.verify(token)

    assert idp.introspection_calls() == 0


async def test_a_jwt_shaped_token_is_introspected_when_no_key_source_verifies_jwts(
    idp: IdentityProvider, http: httpx.AsyncClient, clock: Clock, monotonic: Clock
) -> None:
    """An IdP that issues JWT access tokens but is configured through introspection alone."""
    verifier = BearerVerifier(
        issuer="https://idp.test",
        audience="https://aql-mcp.test/mcp",
        introspector=introspector(idp, http, clock, monotonic),
    )
    shaped = "eyJhbGciOiJSUzI1NiJ9.e30." + secrets.token_urlsafe(16)

    with pytest.raises(InvalidToken):
        await verifier.verify(shaped)

    assert idp.introspections[shaped] == 1


# Through the app ---------------------------------------------------------------------------------


def introspection_settings(tmp_path: Path, idp: IdentityProvider, url: str | None = None) -> Any:
    return dev_settings(
        tmp_path,
        auth={
            "introspection_url": url or idp.introspection_url,
            "introspection_client_id": INTROSPECTION_CLIENT_ID,
            "introspection_client_secret": idp.introspection_secret,
        },
    )


async def test_the_service_accepts_an_opaque_token_its_idp_vouches_for(idp: IdentityProvider, tmp_path: Path) -> None:
    headers = {**MCP_HEADERS, "authorization": f"Bearer {idp.issue_opaque()}"}

    async with asgi_client(introspection_settings(tmp_path, idp)) as http:
        response = await http.post("/mcp", json=rpc("initialize", initialize_params()), headers=headers)

    assert response.status_code == 200
    assert "mcp-session-id" in response.headers


async def test_the_service_answers_503_when_its_introspection_endpoint_is_down(
    idp: IdentityProvider, tmp_path: Path
) -> None:
    """Appendix B: upstream unavailable is -32006 / HTTP 503, not a 401 that would make the client drop its token."""
    headers = {**MCP_HEADERS, "authorization": f"Bearer {random_token()}"}

    async with asgi_client(introspection_settings(tmp_path, idp, UNREACHABLE)) as http:
        response = await http.post("/mcp", json=rpc("initialize", initialize_params()), headers=headers)

    assert response.status_code == 503
    assert response.json()["error"]["code"] == -32006
    assert response.headers["retry-after"].isdigit()
    assert "www-authenticate" not in response.headers
