import base64
import hashlib
import hmac
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization

from aql_mcp.auth.dev_issuer import DevIssuer
from aql_mcp.auth.jwks import SigningKey
from aql_mcp.auth.tokens import BearerVerifier, principal_from
from aql_mcp.exceptions import InvalidToken
from tests.support.clock import Clock

pytestmark = pytest.mark.anyio

ISSUER = "http://127.0.0.1:8000"
AUDIENCE = "http://127.0.0.1:8000/mcp"
LEEWAY = 30


@pytest.fixture
def issuer(tmp_path: Path) -> DevIssuer:
    return DevIssuer(state_dir=tmp_path, issuer=ISSUER, audience=AUDIENCE)


@pytest.fixture
def verifier(issuer: DevIssuer) -> BearerVerifier:
    return make_verifier(issuer)


def make_verifier(issuer: DevIssuer, clock: Clock | None = None) -> BearerVerifier:
    keys = {issuer.kid: SigningKey(issuer.kid, "ES256", issuer.public_key)}
    if clock is None:
        return BearerVerifier(static_keys=keys, issuer=ISSUER, audience=AUDIENCE, leeway=LEEWAY)
    return BearerVerifier(static_keys=keys, issuer=ISSUER, audience=AUDIENCE, leeway=LEEWAY, clock=clock)


def claims(**changes: Any) -> dict[str, Any]:
    now = int(time.time())
    base: dict[str, Any] = {
        "iss": ISSUER,
        "aud": AUDIENCE,
        "sub": "alice",
        "iat": now,
        "nbf": now,
        "exp": now + 600,
        "scope": "mcp",
    }
    base.update(changes)
    return {k: v for k, v in base.items() if v is not None}


def sign(issuer: DevIssuer, payload: dict[str, Any], **header: Any) -> str:
    return jwt.encode(payload, issuer.private_key, algorithm="ES256", headers={"kid": issuer.kid, **header})


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


async def test_valid_token_yields_its_principal(issuer: DevIssuer, verifier: BearerVerifier) -> None:
    payload = claims(scope="mcp records")
    principal = await verifier.verify(sign(issuer, payload))
    assert principal.subject == "alice"
    assert principal.scopes == frozenset({"mcp", "records"})
    assert principal.expires_at == payload["exp"]


async def test_token_minted_by_the_dev_issuer_is_accepted(issuer: DevIssuer, verifier: BearerVerifier) -> None:
    assert (await verifier.verify(issuer.mint(subject="bob", scopes=["mcp"], ttl=60))).subject == "bob"


@pytest.mark.parametrize(
    "changes",
    [
        pytest.param(lambda now: {"iss": "https://evil.example"}, id="wrong-iss"),
        pytest.param(lambda now: {"aud": "https://other.example/mcp"}, id="wrong-aud"),
        pytest.param(lambda now: {"exp": now - LEEWAY - 60}, id="expired"),
        pytest.param(lambda now: {"nbf": now + LEEWAY + 60}, id="nbf-in-future"),
        pytest.param(lambda now: {"exp": None}, id="missing-exp"),
        pytest.param(lambda now: {"iss": None}, id="missing-iss"),
        pytest.param(lambda now: {"aud": None}, id="missing-aud"),
        pytest.param(lambda now: {"sub": None}, id="missing-sub"),
        # Claims of the wrong type (issue 12): a string exp was read as a number and accepted.
        pytest.param(lambda now: {"exp": str(now + 600)}, id="exp-as-string"),
        pytest.param(lambda now: {"exp": True}, id="exp-as-boolean"),
        pytest.param(lambda now: {"nbf": str(now)}, id="nbf-as-string"),
        pytest.param(lambda now: {"iat": [now]}, id="iat-as-list"),
        pytest.param(lambda now: {"sub": 42}, id="sub-as-number"),
    ],
)
async def test_token_with_bad_claims_is_refused(
    issuer: DevIssuer, verifier: BearerVerifier, changes: Callable[[int], dict[str, Any]]
) -> None:
    with pytest.raises(InvalidToken):
        await verifier.verify(sign(issuer, claims(**changes(int(time.time())))))


async def test_token_expired_within_the_leeway_is_accepted(issuer: DevIssuer, verifier: BearerVerifier) -> None:
    token = sign(issuer, claims(exp=int(time.time()) - LEEWAY // 2))
    assert (await verifier.verify(token)).subject == "alice"


async def test_unsigned_token_with_alg_none_is_refused(issuer: DevIssuer, verifier: BearerVerifier) -> None:
    token = jwt.encode(claims(), None, algorithm="none", headers={"kid": issuer.kid})
    with pytest.raises(InvalidToken):
        await verifier.verify(token)


async def test_hs256_token_signed_with_the_public_key_bytes_is_refused(
    issuer: DevIssuer, verifier: BearerVerifier
) -> None:
    # The classic key-confusion attack: the public key used as an HMAC secret.
    public_pem = issuer.public_key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    header = b64url(json.dumps({"alg": "HS256", "typ": "JWT", "kid": issuer.kid}).encode())
    payload = b64url(json.dumps(claims()).encode())
    signing_input = f"{header}.{payload}".encode("ascii")
    signature = b64url(hmac.new(public_pem, signing_input, hashlib.sha256).digest())
    with pytest.raises(InvalidToken):
        await verifier.verify(f"{header}.{payload}.{signature}")


async def test_token_with_an_unknown_kid_is_refused(issuer: DevIssuer, verifier: BearerVerifier) -> None:
    with pytest.raises(InvalidToken):
        await verifier.verify(sign(issuer, claims(), kid="not-a-known-kid"))


async def test_token_without_a_kid_is_refused(issuer: DevIssuer, verifier: BearerVerifier) -> None:
    token = jwt.encode(claims(), issuer.private_key, algorithm="ES256")
    with pytest.raises(InvalidToken):
        await verifier.verify(token)


async def test_token_signed_by_another_key_is_refused(tmp_path: Path, verifier: BearerVerifier) -> None:
    stranger = DevIssuer(state_dir=tmp_path / "stranger", issuer=ISSUER, audience=AUDIENCE)
    with pytest.raises(InvalidToken):
        await verifier.verify(stranger.mint(subject="mallory", scopes=["mcp"], ttl=60))


async def test_token_with_a_tampered_signature_is_refused(issuer: DevIssuer, verifier: BearerVerifier) -> None:
    header, payload, signature = sign(issuer, claims()).split(".")
    middle = len(signature) // 2
    flipped = "A" if signature[middle] != "A" else "B"
    tampered = signature[:middle] + flipped + signature[middle + 1 :]
    with pytest.raises(InvalidToken):
        await verifier.verify(f"{header}.{payload}.{tampered}")


async def test_token_with_a_tampered_payload_is_refused(issuer: DevIssuer, verifier: BearerVerifier) -> None:
    header, _, signature = sign(issuer, claims()).split(".")
    forged = b64url(json.dumps(claims(sub="admin")).encode())
    with pytest.raises(InvalidToken):
        await verifier.verify(f"{header}.{forged}.{signature}")


@pytest.mark.parametrize("token", ["", "garbage", "a.b.c", "a.b"])
async def test_malformed_token_is_refused(verifier: BearerVerifier, token: str) -> None:
    with pytest.raises(InvalidToken):
        await verifier.verify(token)


async def test_refused_token_stays_refused(issuer: DevIssuer, verifier: BearerVerifier) -> None:
    token = sign(issuer, claims(iss="https://evil.example"))
    for _ in range(2):
        with pytest.raises(InvalidToken):
            await verifier.verify(token)


async def test_verified_token_keeps_verifying_until_its_expiry(issuer: DevIssuer) -> None:
    payload = claims()
    clock = Clock(payload["iat"])
    verifier = make_verifier(issuer, clock)
    token = sign(issuer, payload)
    assert (await verifier.verify(token)).subject == "alice"
    clock.now = payload["exp"] - 1
    assert (await verifier.verify(token)).subject == "alice"
    clock.now = payload["exp"] + LEEWAY - 1
    assert (await verifier.verify(token)).subject == "alice"


async def test_verified_token_is_answered_from_the_cache(issuer: DevIssuer, verifier: BearerVerifier) -> None:
    token = sign(issuer, claims())
    assert await verifier.verify(token) is await verifier.verify(token)


async def test_verified_token_is_refused_after_expiry_plus_leeway(issuer: DevIssuer) -> None:
    payload = claims()
    clock = Clock(payload["iat"])
    verifier = make_verifier(issuer, clock)
    token = sign(issuer, payload)
    assert (await verifier.verify(token)).subject == "alice"
    clock.now = payload["exp"] + LEEWAY + 1
    with pytest.raises(InvalidToken):
        await verifier.verify(token)


async def test_fresh_token_is_refused_when_the_injected_clock_is_past_its_expiry(issuer: DevIssuer) -> None:
    payload = claims()
    verifier = make_verifier(issuer, Clock(payload["exp"] + LEEWAY + 1))
    with pytest.raises(InvalidToken):
        await verifier.verify(sign(issuer, payload))


@pytest.mark.parametrize(
    ("claim", "scopes"),
    [
        ({"scope": "a b"}, {"a", "b"}),
        ({"scp": ["a", "b"]}, {"a", "b"}),
        ({"scope": ""}, set()),
        ({}, set()),
        ({"scope": 7}, set()),
    ],
)
def test_scopes_come_from_scope_or_scp(claim: dict[str, Any], scopes: set[str]) -> None:
    principal = principal_from({"sub": "alice", "exp": 10, **claim})
    assert principal.scopes == frozenset(scopes)


def test_principal_digest_does_not_reveal_the_subject() -> None:
    principal = principal_from({"sub": "alice@example.com", "exp": 10})
    assert "alice" not in principal.digest
    assert principal.digest == principal_from({"sub": "alice@example.com", "exp": 99}).digest
