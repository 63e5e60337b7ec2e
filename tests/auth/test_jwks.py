"""The corporate JWKS as a key source (corporate Appendix A.1: keys by `kid`, TTL <= 10 min).

`JwksKeySource` fetches a real JWKS over HTTP from the IdP double (tests/support/idp.py) with a
real `httpx.AsyncClient`; only the clock is injected, so TTL, cooldown and staleness are decided
without waiting.
"""

from __future__ import annotations

import base64
import json
import secrets
import socket
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import anyio
import httpx
import jwt
import pytest
from starlette.responses import Response

import tests.support.idp as idp_module
from aql_mcp.auth.jwks import JwksKeySource, jwks_host
from aql_mcp.auth.tokens import JWKS_RETRY_AFTER, BearerVerifier
from aql_mcp.exceptions import UPSTREAM_UNAVAILABLE, InvalidToken, RetryLater
from aql_mcp.observability.logging import configure_logging
from tests.support.clock import Clock
from tests.support.idp import IdentityProvider, new_private_key, running_idp

pytestmark = pytest.mark.anyio

COOLDOWN = 30.0
TTL = 300.0
MAX_STALE = 3600.0


@pytest.fixture(scope="module")
def provider() -> Iterator[IdentityProvider]:
    with running_idp() as idp:
        yield idp


@pytest.fixture
def idp(provider: IdentityProvider) -> Iterator[IdentityProvider]:
    """The module's IdP, answering again after each test; keys tests publish stay (they only add)."""
    yield provider
    provider.answer_status = 200


@pytest.fixture
def clock() -> Clock:
    return Clock(10_000.0)


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=5.0) as client:
        yield client


@pytest.fixture
def source(idp: IdentityProvider, http: httpx.AsyncClient, clock: Clock) -> JwksKeySource:
    return make_source(idp, http, clock)


def make_source(
    idp: IdentityProvider, http: httpx.AsyncClient, clock: Clock, algorithms: tuple[str, ...] = ("RS256", "ES256")
) -> JwksKeySource:
    return JwksKeySource(
        idp.jwks_url,
        client=http,
        algorithms=algorithms,
        ttl=TTL,
        cooldown=COOLDOWN,
        max_stale=MAX_STALE,
        clock=clock,
    )


def verifier(idp: IdentityProvider, source: JwksKeySource) -> BearerVerifier:
    return BearerVerifier(issuer=idp.issuer, audience=idp.audience, jwks=source)


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


async def test_no_key_set_is_unavailable_before_the_first_fetch(source: JwksKeySource) -> None:
    assert source.status() == "unavailable"
    assert source.due()


@pytest.mark.parametrize("alg", ["RS256", "ES256"])
async def test_fetched_rsa_and_ec_keys_verify_the_idps_tokens(
    idp: IdentityProvider, source: JwksKeySource, alg: str
) -> None:
    assert await source.refresh() is True

    signing = await source.key(idp.key(alg).kid)
    principal = await verifier(idp, source).verify(idp.mint(alg=alg, claims={"sub": "carol", "scope": "mcp read"}))

    assert signing is not None
    assert signing.algorithm == alg
    assert principal.subject == "carol"
    assert principal.scopes == frozenset({"mcp", "read"})
    assert source.status() == "ok"
    assert not source.due()


@pytest.mark.parametrize("alg", ["PS256", "EdDSA"])
async def test_ps256_and_ed25519_keys_verify_the_idps_tokens_when_the_allow_list_names_them(
    idp: IdentityProvider, http: httpx.AsyncClient, clock: Clock, alg: str
) -> None:
    """RSA-PSS and Ed25519 (RFC 8037: `kty: OKP`, `alg: EdDSA`), as corporate IdPs now sign (issue 23)."""
    idp.rotate(alg)
    allowing = make_source(idp, http, clock, algorithms=("RS256", "ES256", "PS256", "EdDSA"))
    await allowing.refresh()

    signing = await allowing.key(idp.key(alg).kid)
    principal = await verifier(idp, allowing).verify(idp.mint(alg=alg, claims={"sub": "dana"}))

    assert signing is not None
    assert signing.algorithm == alg
    assert principal.subject == "dana"


@pytest.mark.parametrize("alg", ["PS256", "EdDSA"])
async def test_ps256_and_ed25519_keys_are_skipped_by_the_default_allow_list(
    idp: IdentityProvider, source: JwksKeySource, alg: str
) -> None:
    idp.rotate(alg)
    await source.refresh()

    assert await source.key(idp.key(alg).kid) is None
    with pytest.raises(InvalidToken):
        await verifier(idp, source).verify(idp.mint(alg=alg))


async def test_an_ed25519_key_claiming_an_rsa_algorithm_is_skipped(
    idp: IdentityProvider, http: httpx.AsyncClient, clock: Clock
) -> None:
    """A key serves only the algorithms of its own type: an OKP key is never taken for RS256 or PS256."""
    okp = idp.add_key("EdDSA")
    idp.publish({**okp.public_jwk(), "kid": "okp-as-rsa", "alg": "PS256"})
    allowing = make_source(idp, http, clock, algorithms=("RS256", "PS256", "EdDSA"))
    await allowing.refresh()

    assert await allowing.key("okp-as-rsa") is None
    assert await allowing.key(okp.kid) is not None


async def test_a_key_without_alg_takes_the_allowed_algorithm_of_its_type(
    idp: IdentityProvider, source: JwksKeySource
) -> None:
    ec_jwk = {k: v for k, v in idp.key("ES256").public_jwk().items() if k != "alg"}
    idp.publish({**ec_jwk, "kid": "ec-no-alg"})
    await source.refresh()

    signing = await source.key("ec-no-alg")

    assert signing is not None
    assert signing.algorithm == "ES256"


async def test_keys_the_service_cannot_use_are_skipped_and_the_rest_of_the_set_is_served(
    idp: IdentityProvider, http: httpx.AsyncClient, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Appendix A.1: signature keys of an allowed asymmetric algorithm only; an `oct` key is never trusted."""
    enc = idp.add_key("RS256", use="enc", kid="enc-key")
    rsa_jwk = idp.key("RS256").public_jwk()
    idp.publish({**rsa_jwk, "kid": "rsa-declared-es256", "alg": "ES256"})
    idp.publish({"kty": "oct", "kid": "hmac", "alg": "HS256", "use": "sig", "k": b64url(b"k" * 32)})
    idp.publish({"kty": "oct", "kid": "hmac-no-alg", "k": b64url(b"k" * 32)})
    idp.publish({**rsa_jwk, "kid": "rsa-unknown-alg", "alg": "PS256"})
    idp.publish({"kty": "RSA", "kid": "broken-rsa", "alg": "RS256", "n": "!!!", "e": "AQAB"})
    idp.publish({"kty": "EC", "kid": "broken-ec", "alg": "ES256", "crv": "P-256", "x": "AA", "y": "AA"})
    idp.publish({**rsa_jwk, "kid": 7})
    idp.publish({"kid": "no-kty"})
    published = idp.jwks
    monkeypatch.setattr(idp, "jwks", lambda: {"keys": [*published()["keys"], "garbage", 42, None, []]})
    # HS256 allowed for tokens must still not make a published symmetric key trusted.
    source = make_source(idp, http, clock, algorithms=("RS256", "ES256", "HS256"))

    assert await source.refresh() is True

    skipped = [enc.kid, "rsa-declared-es256", "hmac", "hmac-no-alg", "rsa-unknown-alg", "broken-rsa", "broken-ec"]
    assert [kid for kid in skipped if await source.key(kid) is not None] == []
    assert await source.key(idp.key("RS256").kid) is not None
    assert await source.key(idp.key("ES256").kid) is not None
    assert source.status() == "ok"


async def test_a_key_of_an_algorithm_outside_the_allow_list_is_skipped(
    idp: IdentityProvider, http: httpx.AsyncClient, clock: Clock
) -> None:
    source = make_source(idp, http, clock, algorithms=("ES256",))
    await source.refresh()

    assert await source.key(idp.key("RS256").kid) is None
    assert await source.key(idp.key("ES256").kid) is not None


async def test_a_token_signed_with_a_published_symmetric_key_is_refused(
    idp: IdentityProvider, http: httpx.AsyncClient, clock: Clock
) -> None:
    secret = secrets.token_bytes(32)
    idp.publish({"kty": "oct", "kid": "hmac", "alg": "HS256", "use": "sig", "k": b64url(secret)})
    source = make_source(idp, http, clock, algorithms=("RS256", "ES256", "HS256"))
    await source.refresh()
    token = jwt.encode(idp.claims(), secret, algorithm="HS256", headers={"kid": "hmac"})

    with pytest.raises(InvalidToken):
        await verifier(idp, source).verify(token)


async def test_an_unknown_kid_is_fetched_once_after_a_rotation(
    idp: IdentityProvider, source: JwksKeySource, clock: Clock
) -> None:
    await source.refresh()
    before = idp.fetches
    clock.advance(COOLDOWN + 1)
    new_kid = idp.rotate("RS256")

    principal = await verifier(idp, source).verify(idp.mint(alg="RS256"))
    again = await source.key(new_kid)

    assert principal.subject == "alice"
    assert again is not None
    assert idp.fetches == before + 1


async def test_a_second_unknown_kid_within_the_cooldown_fetches_nothing(
    idp: IdentityProvider, source: JwksKeySource, clock: Clock
) -> None:
    await source.refresh()
    clock.advance(COOLDOWN + 1)
    before = idp.fetches

    assert await source.key("ghost-1") is None
    assert idp.fetches == before + 1
    clock.advance(COOLDOWN - 1)
    assert await source.key("ghost-2") is None
    assert idp.fetches == before + 1
    clock.advance(2)
    assert await source.key("ghost-3") is None
    assert idp.fetches == before + 2


async def test_a_burst_of_concurrent_unknown_kids_fetches_once(
    idp: IdentityProvider, source: JwksKeySource, clock: Clock
) -> None:
    await source.refresh()
    clock.advance(COOLDOWN + 1)
    before = idp.fetches

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            for n in range(10):
                group.start_soon(source.key, f"ghost-{n}")

    assert idp.fetches == before + 1


def serve_garbage(monkeypatch: pytest.MonkeyPatch, idp: IdentityProvider) -> None:
    """The IdP answers 200 with a body that is not JSON (the double's responses are built at call time)."""
    monkeypatch.setattr(
        idp_module, "JSONResponse", lambda *a, **k: Response(b"{not json", 200, media_type="application/json")
    )


def serve_not_a_key_set(monkeypatch: pytest.MonkeyPatch, idp: IdentityProvider) -> None:
    monkeypatch.setattr(idp, "jwks", lambda: {"keys": "none today"})


def serve_status(status: int) -> Callable[[pytest.MonkeyPatch, IdentityProvider], None]:
    def fail(monkeypatch: pytest.MonkeyPatch, idp: IdentityProvider) -> None:
        idp.answer_status = status

    return fail


FAILURES: dict[str, Callable[[pytest.MonkeyPatch, IdentityProvider], Any]] = {
    "500": serve_status(500),
    "503": serve_status(503),
    "404": serve_status(404),
    "garbage-json": serve_garbage,
    "not-a-key-set": serve_not_a_key_set,
}


@pytest.mark.parametrize("failure", FAILURES)
async def test_a_failing_idp_is_degraded_and_the_last_good_keys_keep_serving(
    idp: IdentityProvider, source: JwksKeySource, clock: Clock, monkeypatch: pytest.MonkeyPatch, failure: str
) -> None:
    await source.refresh()
    token = idp.mint(alg="ES256")
    FAILURES[failure](monkeypatch, idp)
    clock.advance(TTL)
    before = idp.fetches

    replaced = await source.refresh()

    assert replaced is False
    assert idp.fetches == before + 1
    assert source.status() == "degraded"
    assert await source.key(idp.key("RS256").kid) is not None
    assert (await verifier(idp, source).verify(token)).subject == "alice"


async def test_a_failed_first_fetch_leaves_the_source_unavailable(idp: IdentityProvider, source: JwksKeySource) -> None:
    idp.answer_status = 500

    assert await source.refresh() is False
    assert source.status() == "unavailable"
    assert await source.key(idp.key("RS256").kid) is None


async def test_an_unreachable_idp_after_a_good_fetch_is_degraded(
    idp: IdentityProvider, http: httpx.AsyncClient, clock: Clock
) -> None:
    source = make_source(idp, http, clock)
    await source.refresh()
    source.url = "http://127.0.0.1:9/jwks.json"  # discard port: connection refused

    assert await source.refresh() is False
    assert source.status() == "degraded"
    assert await source.key(idp.key("ES256").kid) is not None


async def test_keys_older_than_max_stale_are_unavailable_and_no_longer_served(
    idp: IdentityProvider, source: JwksKeySource, clock: Clock
) -> None:
    await source.refresh()
    token = idp.mint(alg="RS256")
    idp.answer_status = 500
    clock.advance(MAX_STALE - 1)
    await source.refresh()
    assert source.status() == "degraded"

    clock.advance(1)

    assert source.status() == "unavailable"
    assert await source.key(idp.key("RS256").kid) is None
    with pytest.raises(RetryLater) as refused:
        await verifier(idp, source).verify(token)
    assert (refused.value.status, refused.value.retry_after) == (503, JWKS_RETRY_AFTER)


async def test_a_jwt_before_any_key_set_could_be_fetched_is_unavailable_not_invalid(
    idp: IdentityProvider, source: JwksKeySource
) -> None:
    """The client keeps a token that may be good and retries (503 + Retry-After, -32006), as when
    introspection cannot ask the IdP; a 401 would make it throw the token away."""
    idp.answer_status = 500
    assert await source.refresh() is False

    with pytest.raises(RetryLater) as refused:
        await verifier(idp, source).verify(idp.mint(alg="RS256"))
    assert refused.value.code == UPSTREAM_UNAVAILABLE


async def test_an_unknown_kid_while_the_key_set_is_fresh_stays_invalid(
    idp: IdentityProvider, source: JwksKeySource
) -> None:
    await source.refresh()
    foreign = idp.mint(alg="RS256", key=new_private_key("RS256"), headers={"kid": "not-published"})

    with pytest.raises(InvalidToken):
        await verifier(idp, source).verify(foreign)


async def test_a_recovered_idp_brings_the_source_back_to_ok(
    idp: IdentityProvider, source: JwksKeySource, clock: Clock
) -> None:
    await source.refresh()
    idp.answer_status = 500
    clock.advance(MAX_STALE)
    await source.refresh()
    assert source.status() == "unavailable"

    idp.answer_status = 200
    new_kid = idp.rotate("ES256")

    assert await source.refresh() is True
    assert source.status() == "ok"
    assert await source.key(new_kid) is not None
    assert not source.due()


@pytest.mark.parametrize(("configured", "effective"), [(3600.0, 600.0), (601.0, 600.0), (600.0, 600.0), (60.0, 60.0)])
async def test_the_ttl_is_capped_at_ten_minutes(
    idp: IdentityProvider, http: httpx.AsyncClient, clock: Clock, configured: float, effective: float
) -> None:
    """Appendix A.1: a key set is reused for at most 10 minutes."""
    source = JwksKeySource(idp.jwks_url, client=http, algorithms=("RS256",), ttl=configured, clock=clock)
    await source.refresh()

    clock.advance(effective - 0.5)
    assert source.ttl == effective
    assert not source.due()
    clock.advance(0.5)
    assert source.due()


# --- What a failure logs -------------------------------------------------------------------------


def jwks_lines(capsys: pytest.CaptureFixture[str], event: str) -> list[dict[str, Any]]:
    return [line for line in log_lines(capsys) if line["event"] == event]


def log_lines(capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]


@pytest.fixture
def logs(capsys: pytest.CaptureFixture[str]) -> pytest.CaptureFixture[str]:
    configure_logging(level="info", console=False)
    capsys.readouterr()
    return capsys


def serve_no_keys(monkeypatch: pytest.MonkeyPatch, idp: IdentityProvider) -> None:
    monkeypatch.setattr(idp, "jwks", lambda: {"keys": [{"kty": "oct", "kid": "hmac", "k": b64url(b"k" * 32)}]})


LOGGED_FAILURES: dict[str, tuple[Callable[[pytest.MonkeyPatch, IdentityProvider], Any], str, int | None]] = {
    "500": (serve_status(500), "http_status", 500),
    "404": (serve_status(404), "http_status", 404),
    "garbage-json": (serve_garbage, "invalid_json", None),
    "not-a-key-set": (serve_not_a_key_set, "not_a_jwk_set", None),
    "no-usable-key": (serve_no_keys, "no_usable_keys", None),
}


@pytest.mark.parametrize("failure", LOGGED_FAILURES)
async def test_a_failed_refresh_logs_why_the_host_and_the_age_of_the_last_good_set(
    idp: IdentityProvider,
    source: JwksKeySource,
    clock: Clock,
    monkeypatch: pytest.MonkeyPatch,
    logs: pytest.CaptureFixture[str],
    failure: str,
) -> None:
    await source.refresh()
    make_fail, reason, status = LOGGED_FAILURES[failure]
    make_fail(monkeypatch, idp)
    clock.advance(TTL)

    assert await source.refresh() is False

    (line,) = jwks_lines(logs, "jwks_refresh_failed")
    assert line["level"] == "warning"
    assert line["reason"] == reason
    assert line["status"] == status
    assert line["host"] == idp.jwks_url.split("/")[2]
    assert line["last_good_seconds_ago"] == TTL


async def test_a_set_without_a_usable_key_keeps_the_last_good_keys(
    idp: IdentityProvider, source: JwksKeySource, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Replacing good keys with none would refuse every caller: an empty set is a failed refresh."""
    await source.refresh()
    serve_no_keys(monkeypatch, idp)

    assert await source.refresh() is False
    assert source.status() == "degraded"
    assert await source.key(idp.key("RS256").kid) is not None


async def test_a_first_fetch_that_fails_logs_no_last_good_age(
    idp: IdentityProvider, source: JwksKeySource, logs: pytest.CaptureFixture[str]
) -> None:
    idp.answer_status = 503

    await source.refresh()

    (line,) = jwks_lines(logs, "jwks_refresh_failed")
    assert (line["reason"], line["status"], line["last_good_seconds_ago"]) == ("http_status", 503, None)


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_a_refused_connection_is_logged_as_such(
    http: httpx.AsyncClient, clock: Clock, logs: pytest.CaptureFixture[str]
) -> None:
    port = closed_port()
    source = JwksKeySource(f"http://127.0.0.1:{port}/jwks.json", client=http, algorithms=("RS256",), clock=clock)

    assert await source.refresh() is False

    (line,) = jwks_lines(logs, "jwks_refresh_failed")
    assert (line["reason"], line["error"], line["host"]) == ("connection_refused", "ConnectError", f"127.0.0.1:{port}")


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port on 127.0.0.1 that takes connections (the kernel's backlog) and never answers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield int(listener.getsockname()[1])


async def test_a_jwks_that_never_answers_is_logged_as_a_timeout(
    silent_port: int, clock: Clock, logs: pytest.CaptureFixture[str]
) -> None:
    async with httpx.AsyncClient(timeout=0.2) as impatient:
        source = JwksKeySource(
            f"http://127.0.0.1:{silent_port}/jwks.json", client=impatient, algorithms=("RS256",), clock=clock
        )
        assert await source.refresh() is False

    (line,) = jwks_lines(logs, "jwks_refresh_failed")
    assert (line["reason"], line["error"]) == ("timeout", "ReadTimeout")


async def test_the_log_names_the_host_only_never_the_query_string_or_user_info(
    idp: IdentityProvider, http: httpx.AsyncClient, clock: Clock, logs: pytest.CaptureFixture[str]
) -> None:
    secret = "s3cret-" + secrets.token_hex(8)
    idp.answer_status = 500
    host = idp.jwks_url.split("/")[2]
    url = f"http://user:{secret}@{host}/jwks.json?api_key={secret}"
    source = JwksKeySource(url, client=http, algorithms=("RS256",), clock=clock)

    await source.refresh()

    out = logs.readouterr().out
    assert secret not in out
    assert '"host":"' + host + '"' in out


async def test_a_kid_still_unknown_after_the_refetch_is_logged_once(
    idp: IdentityProvider, source: JwksKeySource, clock: Clock, logs: pytest.CaptureFixture[str]
) -> None:
    await source.refresh()
    clock.advance(COOLDOWN + 1)

    assert await source.key("ghost-" + "x" * 200) is None
    assert await source.key("ghost-2") is None  # within the cooldown: no fetch, no line

    lines = log_lines(logs)
    (line,) = [line for line in lines if line["event"] == "jwks_key_not_found"]
    assert line["level"] == "warning"
    assert line["kid"] == ("ghost-" + "x" * 200)[:64]
    assert line["keys"] >= 2
    assert [line for line in lines if line["event"] == "jwks_refresh_failed"] == []


async def test_a_key_set_with_no_usable_key_still_expires_the_last_good_keys_at_max_stale(
    idp: IdentityProvider, source: JwksKeySource, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    await source.refresh()
    monkeypatch.setattr(idp, "jwks", lambda: {"keys": []})
    clock.advance(MAX_STALE - 1)
    assert await source.refresh() is False
    assert source.status() == "degraded"

    clock.advance(1)

    assert source.status() == "unavailable"
    assert await source.key(idp.key("RS256").kid) is None


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("https://idp.example.com/jwks?secret=x", "idp.example.com"),
        ("https://user:pw@idp.example.com:8443/jwks", "idp.example.com:8443"),
        ("https://[2001:db8::1]:8443/jwks", "[2001:db8::1]:8443"),
        ("https://[::1]/jwks", "[::1]"),
    ],
)
def test_the_logged_jwks_host_is_host_and_port_with_an_ipv6_address_in_brackets(url: str, host: str) -> None:
    assert jwks_host(url) == host
