"""A real identity provider double: a JWKS and an RFC 7662 introspection endpoint over HTTP from a
real uvicorn, and a token minter.

The service under test fetches `jwks_url` with its own HTTP client, exactly as it fetches the
corporate JWKS in production. Tests mutate the key set (`rotate`, `add_key`), make the endpoint
fail (`answer_status = 500`) and count what the service fetched (`fetches`, `wait_for_fetches`).
Opaque tokens come from `issue_opaque`; the introspection endpoint authenticates the service by
HTTP Basic, counts every call per token (`introspections`) and keeps each request it got
(`introspection_requests`), can answer anything a test sets for a token (`answer_introspection`),
can fail (`introspection_status`, or a body that is not JSON: `introspection_body`) and can hold its
answers until a test releases them (`hold_introspection`, `release_introspection`).
"""

from __future__ import annotations

import base64
import secrets
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

import anyio
import jwt
import uvicorn
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.support.tls import Tls

DEFAULT_AUDIENCE = "https://aql-mcp.test/mcp"
STARTUP_SECONDS = 10.0
INTROSPECTION_CLIENT_ID = "aql-mcp"
# A held introspection answer is released after this long at the latest (a test that forgot it).
HOLD_SECONDS = 30.0

PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey
# The JWK family of each algorithm the double signs with.
JWK_FAMILY = {"RS256": RSAAlgorithm, "PS256": RSAAlgorithm, "ES256": ECAlgorithm, "EdDSA": OKPAlgorithm}


@dataclass(frozen=True, slots=True)
class IntrospectionRequest:
    """What one introspection call sent: its Authorization and Content-Type headers and form."""

    authorization: str | None
    content_type: str | None
    form: dict[str, list[str]]


@dataclass(frozen=True, slots=True)
class IdpKey:
    """One key pair of the IdP; only its public half is published, with `kid`, `alg` and `use`."""

    kid: str
    alg: str
    private: PrivateKey
    use: str = "sig"

    def public_jwk(self) -> dict[str, Any]:
        jwk = JWK_FAMILY[self.alg].to_jwk(self.private.public_key(), as_dict=True)
        return {**jwk, "kid": self.kid, "alg": self.alg, "use": self.use}

    def public_pem(self) -> bytes:
        return self.private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )


def new_private_key(alg: str) -> PrivateKey:
    if alg in ("RS256", "PS256"):
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    if alg == "ES256":
        return ec.generate_private_key(ec.SECP256R1())
    if alg == "EdDSA":
        return ed25519.Ed25519PrivateKey.generate()
    raise ValueError(f"the IdP double signs RS256, PS256, ES256 and EdDSA only, not {alg}")


class IdentityProvider:
    """Holds the key set and mints tokens; `issuer` is its own base URL."""

    def __init__(self, *, base: str, audience: str = DEFAULT_AUDIENCE) -> None:
        self.base = base
        self.issuer = base
        self.audience = audience
        self.jwks_url = f"{base}/jwks.json"
        self.answer_status = 200
        self.fetches = 0
        self.introspection_url = f"{base}/introspect"
        self.introspection_secret = "introspection-" + secrets.token_hex(8)
        self.introspection_status = 200
        self.introspection_body: bytes | None = None
        self.introspections: Counter[str] = Counter()
        self.introspection_requests: list[IntrospectionRequest] = []
        self._opaque: dict[str, dict[str, Any]] = {}
        self._released = threading.Event()
        self._released.set()
        self._changed = threading.Condition()
        self._keys: list[IdpKey] = []
        self._raw: list[dict[str, Any]] = []
        self._current: dict[str, IdpKey] = {}
        for alg in ("RS256", "ES256"):
            self.rotate(alg)

    # Key set ---------------------------------------------------------------------------------

    def key(self, alg: str = "RS256") -> IdpKey:
        """The current signing key for `alg`."""
        return self._current[alg]

    def add_key(self, alg: str = "RS256", *, use: str = "sig", kid: str | None = None) -> IdpKey:
        """Publish one more key (not made current): e.g. `use="enc"`, which a verifier must skip."""
        key = IdpKey(kid=kid or f"{alg.lower()}-{secrets.token_hex(4)}", alg=alg, private=new_private_key(alg), use=use)
        with self._changed:
            self._keys.append(key)
        return key

    def rotate(self, alg: str = "RS256", *, retire: bool = False) -> str:
        """A new current key for `alg` with a new kid; the old one stays published unless `retire`."""
        old = self._current.get(alg)
        key = self.add_key(alg)
        with self._changed:
            if retire and old is not None:
                self._keys.remove(old)
            self._current[alg] = key
        return key.kid

    def publish(self, jwk: Mapping[str, Any]) -> None:
        """Publish a raw JWK as is, e.g. a symmetric `oct` key that a verifier must never trust."""
        with self._changed:
            self._raw.append(dict(jwk))

    def jwks(self) -> dict[str, Any]:
        with self._changed:
            return {"keys": [k.public_jwk() for k in self._keys] + [dict(j) for j in self._raw]}

    # Tokens ----------------------------------------------------------------------------------

    def claims(self, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Valid claims for the default audience; an override of None drops that claim."""
        now = int(time.time())
        claims: dict[str, Any] = {
            "iss": self.issuer,
            "aud": self.audience,
            "sub": "alice",
            "iat": now,
            "nbf": now,
            "exp": now + 600,
            "jti": secrets.token_hex(8),
            "scope": "mcp",
        }
        claims.update(overrides or {})
        return {k: v for k, v in claims.items() if v is not None}

    def mint(
        self,
        *,
        alg: str = "RS256",
        kid: str | None = None,
        claims: Mapping[str, Any] | None = None,
        headers: Mapping[str, Any] | None = None,
        key: PrivateKey | None = None,
    ) -> str:
        """A JWT signed by the key `kid` (default: the current `alg` key), or by `key` if given.

        `headers` overrides the JOSE header after the kid is set, so `headers={"kid": "x"}` signs
        with a published key but names another.
        """
        signer = self._find(kid) if kid else self._current[alg]
        header = {"kid": signer.kid, **(headers or {})}
        return jwt.encode(self.claims(claims), key or signer.private, algorithm=alg, headers=header)

    def _find(self, kid: str) -> IdpKey:
        with self._changed:
            return next(k for k in self._keys if k.kid == kid)

    # Opaque tokens and introspection (RFC 7662) -----------------------------------------------

    def issue_opaque(self, *, sub: str = "robot", scope: str = "mcp", ttl: int = 600) -> str:
        """A new opaque token the introspection endpoint calls active until `ttl` seconds from now."""
        token = "opq_" + secrets.token_urlsafe(32)
        with self._changed:
            self._opaque[token] = {"active": True, "sub": sub, "scope": scope, "exp": int(time.time()) + ttl}
        return token

    def answer_introspection(self, token: str, answer: Mapping[str, Any] | None) -> None:
        """Answer exactly `answer` for `token` from now on (None: the IdP does not know it)."""
        with self._changed:
            if answer is None:
                self._opaque.pop(token, None)
            else:
                self._opaque[token] = dict(answer)

    def reset_introspection(self) -> None:
        """Back to answering normally, with no call counted or kept (between tests)."""
        self.release_introspection()
        with self._changed:
            self.introspection_status = 200
            self.introspection_body = None
            self.introspections.clear()
            self.introspection_requests.clear()

    def service_env(self) -> dict[str, str]:
        """The settings that point the service at this IdP's introspection endpoint (plain http on
        loopback, so production mode needs the explicit opt-in)."""
        return {
            "AQL_MCP_AUTH__INTROSPECTION_URL": self.introspection_url,
            "AQL_MCP_AUTH__INTROSPECTION_CLIENT_ID": INTROSPECTION_CLIENT_ID,
            "AQL_MCP_AUTH__INTROSPECTION_CLIENT_SECRET": self.introspection_secret,
            "AQL_MCP_AUTH__ALLOW_INSECURE_HTTP": "true",
        }

    def introspection_calls(self) -> int:
        with self._changed:
            return sum(self.introspections.values())

    def hold_introspection(self) -> None:
        """Introspection answers wait (up to HOLD_SECONDS) until `release_introspection`."""
        self._released.clear()

    def release_introspection(self) -> None:
        self._released.set()

    def wait_for_introspection(self, condition: Callable[[Counter[str]], bool], timeout: float) -> bool:
        """Block until `condition(introspections)` holds; False on timeout."""
        with self._changed:
            return self._changed.wait_for(lambda: condition(self.introspections), timeout=timeout)

    async def serve_introspection(self, request: Request) -> Response:
        form = parse_qs((await request.body()).decode("ascii"))
        token = form.get("token", [""])[0]
        call = IntrospectionRequest(request.headers.get("authorization"), request.headers.get("content-type"), form)
        with self._changed:
            self.introspections[token] += 1
            self.introspection_requests.append(call)
            self._changed.notify_all()
            status, body = self.introspection_status, self.introspection_body
        expected = base64.b64encode(f"{INTROSPECTION_CLIENT_ID}:{self.introspection_secret}".encode()).decode()
        if request.headers.get("authorization") != f"Basic {expected}":
            # RFC 7662 §2.3: a caller that cannot authenticate gets 401.
            return JSONResponse({"error": "invalid_client"}, status_code=401)
        await anyio.to_thread.run_sync(self._released.wait, HOLD_SECONDS)
        if status != 200:
            return JSONResponse({"error": "temporarily_unavailable"}, status_code=status)
        if body is not None:
            return Response(body, media_type="application/json")
        with self._changed:
            answer = self._opaque.get(token, {"active": False})
        return JSONResponse(answer, headers={"cache-control": "no-store"})

    # HTTP ------------------------------------------------------------------------------------

    def wait_for_fetches(self, count: int, timeout: float) -> bool:
        """Block until the JWKS was requested at least `count` times in all; False on timeout."""
        with self._changed:
            return self._changed.wait_for(lambda: self.fetches >= count, timeout=timeout)

    async def serve_jwks(self, request: Request) -> Response:
        with self._changed:
            self.fetches += 1
            self._changed.notify_all()
            status = self.answer_status
        if status != 200:
            return JSONResponse({"error": "temporarily_unavailable"}, status_code=status)
        return JSONResponse(self.jwks(), headers={"cache-control": "no-store"})

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/jwks.json", self.serve_jwks, methods=["GET"]),
                Route("/introspect", self.serve_introspection, methods=["POST"]),
            ]
        )


@contextmanager
def running_idp(audience: str = DEFAULT_AUDIENCE, tls: Tls | None = None) -> Iterator[IdentityProvider]:
    """An IdP on 127.0.0.1 and a free port, served by uvicorn in a background thread; over HTTPS
    with `tls`'s certificate when given."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Bound and listening before uvicorn starts: connections queue in the backlog meanwhile.
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    port = sock.getsockname()[1]
    scheme = "https" if tls else "http"
    idp = IdentityProvider(base=f"{scheme}://127.0.0.1:{port}", audience=audience)
    certificates = {"ssl_certfile": str(tls.certificate), "ssl_keyfile": str(tls.key)} if tls else {}
    config = uvicorn.Config(idp.app(), log_level="warning", lifespan="off", access_log=False, **certificates)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="idp-uvicorn", daemon=True)
    thread.start()
    try:
        _wait_started(server, thread)
        yield idp
    finally:
        server.should_exit = True
        thread.join(timeout=STARTUP_SECONDS)
        sock.close()


def _wait_started(server: uvicorn.Server, thread: threading.Thread) -> None:
    deadline = time.monotonic() + STARTUP_SECONDS
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("the IdP server thread exited during startup")
        if time.monotonic() > deadline:
            raise RuntimeError(f"the IdP server did not start within {STARTUP_SECONDS}s")
        thread.join(timeout=0.01)
