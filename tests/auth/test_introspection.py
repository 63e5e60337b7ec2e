"""The guards around RFC 7662 introspection: negative cache, single flight, the budget of IdP calls.

The IdP is the stand-in of tests/support/idp.py on a real uvicorn; the introspector calls it over
HTTP with its own client. Clocks are fakes, so cache lifetimes and the budget's refill are exact.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import httpx
import pytest

from aql_mcp.auth.dev_issuer import DevIssuer
from aql_mcp.auth.introspection import IntrospectionLimits, Introspector
from aql_mcp.auth.jwks import SigningKey
from aql_mcp.auth.tokens import BearerVerifier
from aql_mcp.exceptions import IntrospectionBudgetSpent, InvalidToken, UpstreamUnavailable
from tests.support.idp import INTROSPECTION_CLIENT_ID, IdentityProvider, running_idp
from tests.support.wait import eventually

pytestmark = pytest.mark.anyio

SETTLE_SECONDS = 10.0


class Clock:
    def __init__(self, start: float) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture(scope="module")
def served() -> Iterator[IdentityProvider]:
    with running_idp() as provider:
        yield provider


@pytest.fixture
def idp(served: IdentityProvider) -> Iterator[IdentityProvider]:
    yield served
    served.release_introspection()
    served.introspection_status = 200
    served.introspections.clear()


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
        "http://127.0.0.1:9/introspect",  # the discard port: connection refused
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
