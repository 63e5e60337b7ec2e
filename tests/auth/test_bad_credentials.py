"""Production authentication end to end: a real server without `--dev`, a real JWKS over HTTP.

Every bad credential gets 401 with a Bearer challenge naming the realm and the protected-resource
metadata, `error="invalid_token"` when a token was presented (corporate §7.4, Appendix A.1;
RFC 6750 §3), and the credential never reaches a log line or the response (corporate §7.1, B.4).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest

from tests.support.asgi import MCP_HEADERS, initialize_params, rpc
from tests.support.idp import IdentityProvider, IdpKey, new_private_key, running_idp
from tests.support.server import ServerProcess, start_server
from tests.support.wait import until

REALM = "aql-mcp"
ORIGIN = "https://agents.example"
ENC_KID = "encryption-only"
OCT_KID = "symmetric"
OCT_SECRET = secrets.token_bytes(32)
OPAQUE = "opq_" + secrets.token_urlsafe(32)
COOLDOWN_SECONDS = 1
CHALLENGE_PARAM = re.compile(r'\s*([A-Za-z_]+)="([^"]*)"\s*(?:,|$)')


def production_env(idp: IdentityProvider) -> dict[str, str]:
    return {
        "AQL_MCP_AUTH__JWKS_URL": idp.jwks_url,
        "AQL_MCP_AUTH__ISSUER": idp.issuer,
        "AQL_MCP_AUTH__AUDIENCE": idp.audience,
        # The stand-in IdP serves plain http on loopback; production mode refuses that unless told.
        "AQL_MCP_AUTH__ALLOW_INSECURE_HTTP": "true",
        "AQL_MCP_HTTP__ALLOWED_ORIGINS": json.dumps([ORIGIN]),
        "AQL_MCP_AUTH__JWKS_REFETCH_COOLDOWN_SECONDS": str(COOLDOWN_SECONDS),
        "AQL_MCP_AUTH__REQUIRED_SCOPES": json.dumps(["mcp"]),
        "AQL_MCP_AUTH__OPAQUE_TOKENS": json.dumps({_sha256(OPAQUE): {"sub": "robot", "scopes": ["mcp"]}}),
    }


@dataclass(frozen=True)
class Known:
    """The IdP and the keys the service fetched at startup (rotations keep them published)."""

    idp: IdentityProvider
    rsa: IdpKey
    ec: IdpKey

    def mint(self, **options: Any) -> str:
        options.setdefault("kid", self.rsa.kid)
        return self.idp.mint(**options)


@pytest.fixture(scope="module")
def idp() -> Iterator[IdentityProvider]:
    with running_idp() as provider:
        provider.add_key("RS256", use="enc", kid=ENC_KID)
        # A symmetric key in a JWKS is an IdP mistake; trusting it would let anyone who reads it sign.
        provider.publish({"kty": "oct", "kid": OCT_KID, "alg": "HS256", "use": "sig", "k": _b64(OCT_SECRET)})
        yield provider


@pytest.fixture(scope="module")
def known(idp: IdentityProvider) -> Known:
    return Known(idp, idp.key("RS256"), idp.key("ES256"))


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory, known: Known) -> Iterator[ServerProcess]:
    state = tmp_path_factory.mktemp("production")
    with start_server(state, env=production_env(known.idp), dev=False) as server:
        yield server


@pytest.fixture(scope="module")
def http(service: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=service.base, timeout=5.0) as client:
        yield client


# Credentials ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Credential:
    authorization: str | None
    secrets: tuple[str, ...] = ()
    query: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Case:
    id: str
    make: Callable[[Known], Credential]
    # The challenge's `error`; None means it must be absent (RFC 6750 §3.1: no credentials, no error code).
    error: str | None
    # Also accept no `error`: for an unsupported scheme RFC 6750 §3.1 says the challenge SHOULD NOT carry one.
    any_error: bool = False


def bearer(token: str) -> Credential:
    return Credential(f"Bearer {token}", _secret_parts(token))


def _secret_parts(token: str) -> tuple[str, ...]:
    """The token, and its signature alone: a log that trims the token must not keep the secret part."""
    signature = token.rpartition(".")[2]
    return (token, signature) if len(signature) >= 16 else (token,)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _segment(value: dict[str, Any]) -> str:
    return _b64(json.dumps(value, separators=(",", ":")).encode())


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _ago(seconds: int) -> int:
    return int(time.time()) - seconds


def alg_none(known: Known) -> Credential:
    header = {"alg": "none", "typ": "JWT", "kid": known.rsa.kid}
    token = f"{_segment(header)}.{_segment(known.idp.claims())}."
    return Credential(f"Bearer {token}", (token,))


def hs256_with_public_key(known: Known) -> Credential:
    """The classic key-confusion attack: HMAC keyed with the RSA public key's PEM bytes."""
    header = {"alg": "HS256", "typ": "JWT", "kid": known.rsa.kid}
    signing_input = f"{_segment(header)}.{_segment(known.idp.claims())}"
    mac = hmac.new(known.rsa.public_pem(), signing_input.encode(), hashlib.sha256).digest()
    return bearer(f"{signing_input}.{_b64(mac)}")


def basic_scheme(known: Known) -> Credential:
    password = _b64(b"alice:hunter2-" + secrets.token_bytes(12))
    return Credential(f"Basic {password}", (password,))


def token_only_in_query(known: Known) -> Credential:
    token = known.mint()
    return Credential(None, _secret_parts(token), {"access_token": token})


def hs256_with_published_oct_key(known: Known) -> Credential:
    return bearer(jwt.encode(known.idp.claims(), OCT_SECRET, algorithm="HS256", headers={"kid": OCT_KID}))


def tampered_signature(known: Known) -> Credential:
    head, payload, signature = known.mint().split(".")
    raw = bytearray(base64.urlsafe_b64decode(signature + "=" * (-len(signature) % 4)))
    raw[len(raw) // 2] ^= 0x01
    return bearer(f"{head}.{payload}.{_b64(bytes(raw))}")


def tampered_payload(known: Known) -> Credential:
    head, _, signature = known.mint().split(".")
    return bearer(f"{head}.{_segment(known.idp.claims({'sub': 'mallory'}))}.{signature}")


CASES = [
    Case("no-header", lambda k: Credential(None), None),
    Case("basic-scheme", basic_scheme, "invalid_token", any_error=True),
    Case("bearer-without-token", lambda k: Credential("Bearer"), "invalid_token"),
    Case("garbage", lambda k: bearer("garbage-" + secrets.token_hex(16)), "invalid_token"),
    Case("unknown-opaque", lambda k: bearer("opq_" + secrets.token_urlsafe(32)), "invalid_token"),
    Case(
        "expired",
        lambda k: bearer(k.mint(claims={"exp": _ago(120), "iat": _ago(720), "nbf": _ago(720)})),
        "invalid_token",
    ),
    Case("nbf-beyond-skew", lambda k: bearer(k.mint(claims={"nbf": _ago(-120)})), "invalid_token"),
    Case("iat-beyond-skew", lambda k: bearer(k.mint(claims={"iat": _ago(-120)})), "invalid_token"),
    Case("missing-exp", lambda k: bearer(k.mint(claims={"exp": None})), "invalid_token"),
    Case("wrong-iss", lambda k: bearer(k.mint(claims={"iss": "https://idp.evil.example"})), "invalid_token"),
    Case("wrong-aud", lambda k: bearer(k.mint(claims={"aud": "https://other.example/mcp"})), "invalid_token"),
    Case("alg-none", alg_none, "invalid_token"),
    Case("hs256-with-public-key-pem", hs256_with_public_key, "invalid_token"),
    Case("unknown-kid", lambda k: bearer(k.mint(headers={"kid": "unknown-" + secrets.token_hex(4)})), "invalid_token"),
    Case("foreign-key-claiming-known-kid", lambda k: bearer(k.mint(key=new_private_key("RS256"))), "invalid_token"),
    Case("hs256-with-published-oct-key", hs256_with_published_oct_key, "invalid_token"),
    Case("tampered-signature", tampered_signature, "invalid_token"),
    Case("tampered-payload", tampered_payload, "invalid_token"),
    Case("enc-use-key", lambda k: bearer(k.mint(kid=ENC_KID)), "invalid_token"),
    Case("token-only-in-query", token_only_in_query, None),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_credential_is_refused_with_a_bearer_challenge_and_never_logged(
    case: Case, known: Known, service: ServerProcess, http: httpx.Client
) -> None:
    """Corporate §7.1 (no query-string secrets, no secrets in logs), §7.4, Appendix A.1."""
    credential = case.make(known)
    response, request_id = initialize(http, credential)

    assert response.status_code == 401
    assert "mcp-session-id" not in response.headers
    scheme, params = parse_challenge(response.headers["www-authenticate"])
    assert scheme == "Bearer"
    assert params["realm"] == REALM
    assert params["resource_metadata"] == f"{service.base}/.well-known/oauth-protected-resource"
    assert params.get("error") in ((case.error, None) if case.any_error else (case.error,))
    assert response.json()["error"]["data"]["requestId"] == request_id
    assert_never_exposed(service, response, request_id, credential.secrets)


# Valid credentials ---------------------------------------------------------------------------


@pytest.mark.parametrize("alg", ["RS256", "ES256"])
def test_a_valid_jwt_from_the_jwks_opens_a_session(
    alg: str, known: Known, service: ServerProcess, http: httpx.Client
) -> None:
    key = known.rsa if alg == "RS256" else known.ec
    credential = bearer(known.mint(alg=alg, kid=key.kid))
    response, request_id = initialize(http, credential)
    assert response.status_code == 200, response.text
    assert response.headers["mcp-session-id"]
    assert_never_exposed(service, response, request_id, credential.secrets)


@pytest.mark.parametrize(
    ("claim", "offset"),
    [("exp", -10), ("nbf", 10), ("iat", 10)],
    ids=["expired-within-skew", "nbf-within-skew", "iat-within-skew"],
)
def test_clock_skew_up_to_the_setting_is_tolerated(claim: str, offset: int, known: Known, http: httpx.Client) -> None:
    """Corporate Appendix A.1: allowed clock skew (30 s by default, at most 60 s)."""
    response, _ = initialize(http, bearer(known.mint(claims={claim: int(time.time()) + offset})))
    assert response.status_code == 200, response.text


def test_an_allow_listed_opaque_token_opens_a_session(service: ServerProcess, http: httpx.Client) -> None:
    """Corporate Appendix A.3: a built-in allow-list of token digests."""
    response, request_id = initialize(http, bearer(OPAQUE))
    assert response.status_code == 200, response.text
    assert response.headers["mcp-session-id"]
    assert_never_exposed(service, response, request_id, (OPAQUE,))


def test_a_token_lacking_a_required_scope_gets_403_insufficient_scope(
    known: Known, service: ServerProcess, http: httpx.Client
) -> None:
    """Corporate §7.4 (valid token, no rights: 403); RFC 6750 §3.1 `insufficient_scope`."""
    credential = bearer(known.mint(claims={"scope": "reports:read"}))
    response, request_id = initialize(http, credential)
    assert response.status_code == 403
    scheme, params = parse_challenge(response.headers["www-authenticate"])
    assert scheme == "Bearer"
    assert params["realm"] == REALM
    assert params["error"] == "insufficient_scope"
    assert_never_exposed(service, response, request_id, credential.secrets)


# The key set ---------------------------------------------------------------------------------


def test_an_unknown_kid_refetches_the_jwks_once_and_not_again_within_the_cooldown(
    known: Known, http: httpx.Client
) -> None:
    idp = known.idp
    before = idp.fetches
    # Unknown kids until one lands after the cooldown since the service's last fetch.
    until(lambda: refused_unknown_kid(known, http) and idp.fetches > before, "an unknown kid caused no JWKS fetch")
    assert idp.fetches == before + 1
    assert refused_unknown_kid(known, http)
    assert idp.fetches == before + 1


def test_a_key_rotated_at_the_idp_is_accepted_without_a_restart(known: Known, http: httpx.Client) -> None:
    new_kid = known.idp.rotate("RS256")
    token = known.idp.mint(kid=new_kid)
    until(lambda: initialize(http, bearer(token))[0].status_code == 200, "the rotated key was never picked up")


def test_ready_stays_200_but_degraded_while_the_jwks_fails_and_recovers(known: Known, http: httpx.Client) -> None:
    """Readiness holds while the last good key set is usable; its refresh failure shows as degraded."""
    assert jwks_check(http) == (200, "ok")
    idp = known.idp
    idp.answer_status = 500
    try:
        before = idp.fetches
        until(lambda: refused_unknown_kid(known, http) and idp.fetches > before, "no refetch while failing")
        until(lambda: jwks_check(http) == (200, "degraded"), "readiness never reported degraded")
        assert initialize(http, bearer(known.mint()))[0].status_code == 200
    finally:
        idp.answer_status = 200
    until(lambda: refused_unknown_kid(known, http) and jwks_check(http) == (200, "ok"), "never recovered")


def test_ready_is_503_until_a_first_key_set_is_fetched(tmp_path: Path) -> None:
    with running_idp() as idp:
        idp.answer_status = 503
        with (
            start_server(tmp_path, env=production_env(idp), dev=False) as server,
            httpx.Client(base_url=server.base, timeout=5.0) as client,
        ):
            assert jwks_check(client)[0] == 503
            idp.answer_status = 200
            token = idp.mint()
            until(lambda: initialize(client, bearer(token))[0].status_code == 200, "no key set was ever fetched")
            assert jwks_check(client) == (200, "ok")


# Helpers -------------------------------------------------------------------------------------


def initialize(http: httpx.Client, credential: Credential) -> tuple[httpx.Response, str]:
    request_id = "auth-" + secrets.token_hex(8)
    headers = {**MCP_HEADERS, "x-request-id": request_id}
    if credential.authorization is not None:
        headers["authorization"] = credential.authorization
    body = rpc("initialize", initialize_params())
    return http.post("/mcp", json=body, headers=headers, params=credential.query or None), request_id


def refused_unknown_kid(known: Known, http: httpx.Client) -> bool:
    token = known.mint(headers={"kid": "unknown-" + secrets.token_hex(4)})
    return initialize(http, bearer(token))[0].status_code == 401


def jwks_check(http: httpx.Client) -> tuple[int, str | None]:
    response = http.get("/ready")
    return response.status_code, response.json().get("checks", {}).get("jwks")


def parse_challenge(value: str) -> tuple[str, dict[str, str]]:
    scheme, _, rest = value.partition(" ")
    params = dict(CHALLENGE_PARAM.findall(rest))
    assert CHALLENGE_PARAM.sub("", rest).strip() == "", f"unparsed challenge parameters in {value!r}"
    return scheme, params


def assert_never_exposed(
    service: ServerProcess, response: httpx.Response, request_id: str, credential_secrets: tuple[str, ...]
) -> None:
    until(lambda: request_id in service.log_text(), f"request {request_id} was never logged")
    log = service.log_text()
    for secret in credential_secrets:
        assert secret not in log
        assert secret not in response.text
        assert all(secret not in v for v in response.headers.values())
