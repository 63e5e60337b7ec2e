"""Signing keys from the corporate JWKS endpoint, cached (corporate Appendix A.1: TTL <= 10 min).

The key set is refreshed in the background before its TTL runs out. A token whose `kid` is not
in the set triggers one refetch, at most once per cooldown, so a flood of bad tokens cannot
hammer the IdP. Keys the service cannot use (other key types, `use` other than `sig`, algorithms
outside the allow-list) are skipped, not fatal. When a refresh fails, the last good set keeps
serving until it is older than `max_stale`; readiness reports that as degraded. A set without
one usable key is a failure too: replacing good keys with none would refuse every caller.

Every failure is one warning line saying what failed (`reason`: `timeout`, `connection_refused`,
`dns_failed`, `tls_failed`, `connect_failed`, `transport_error`, `http_status` with the `status`,
`invalid_json`, `not_a_jwk_set`, `no_usable_keys`), the JWKS host (never the path or the query
string, where a misconfigured URL could carry a secret) and how long ago the last good fetch was;
a `kid` still unknown after a refetch is a line of its own (`jwks_key_not_found`).
"""

from __future__ import annotations

import socket
import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx
import jwt
import structlog

log = structlog.get_logger("aql_mcp.jwks")

# Each asymmetric algorithm with the one key type (`kty`) that may carry it: RSA PKCS#1 v1.5 and PSS,
# ECDSA on P-256, and Ed25519 (RFC 8037: `kty: OKP`, `crv: Ed25519`, JWS `alg: EdDSA`).
ASYMMETRIC = {"RS256": "RSA", "PS256": "RSA", "ES256": "EC", "EdDSA": "OKP"}
# The longest `kid` a log line repeats: it comes from an unverified token header.
LOGGED_KID_CHARS = 64
# What a failed connection was, by the OS error under httpx's (first match in the cause chain).
CONNECT_CAUSES: tuple[tuple[type[BaseException], str], ...] = (
    (ConnectionRefusedError, "connection_refused"),
    (socket.gaierror, "dns_failed"),
    (ssl.SSLError, "tls_failed"),
)


class JwksFailure(Exception):
    """Why one fetch gave no usable key set: a `reason` word, and the HTTP status if there was one."""

    def __init__(self, reason: str, *, status: int | None = None, error: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status
        self.error = error


@dataclass(frozen=True, slots=True)
class SigningKey:
    kid: str
    algorithm: str
    key: Any


class JwksKeySource:
    """The IdP's current public keys by `kid`."""

    def __init__(
        self,
        url: str,
        *,
        client: httpx.AsyncClient,
        algorithms: tuple[str, ...],
        ttl: float = 600.0,
        cooldown: float = 30.0,
        max_stale: float = 3600.0,
        clock: Callable[[], float] = time.monotonic,
        on_refresh: Callable[..., None] | None = None,
    ) -> None:
        self.url = url
        self._on_refresh = on_refresh
        self._client = client
        self._algorithms = tuple(a for a in algorithms if a in ASYMMETRIC)
        self.ttl = min(ttl, 600.0)
        self._cooldown = cooldown
        self._max_stale = max_stale
        self._clock = clock
        self._keys: dict[str, SigningKey] = {}
        self._fetched_at: float | None = None
        self._last_attempt = float("-inf")
        self._failing = False
        self._lock = anyio.Lock()
        self.refreshes = 0
        self.failures = 0

    def status(self) -> str:
        """`ok`, `degraded` (last refresh failed, last good set still served) or `unavailable`."""
        if not self._usable():
            return "unavailable"
        return "degraded" if self._failing else "ok"

    def due(self) -> bool:
        return self._fetched_at is None or self._clock() - self._fetched_at >= self.ttl

    async def key(self, kid: str) -> SigningKey | None:
        found = self._keys.get(kid) if self._usable() else None
        if found is not None:
            return found
        async with self._lock:
            # Checked under the lock: a burst of unknown kids arriving together makes one fetch.
            if self._clock() - self._last_attempt < self._cooldown:
                return self._keys.get(kid) if self._usable() else None
            if await self._fetch() and kid not in self._keys:
                log.warning(
                    "jwks_key_not_found", kid=kid[:LOGGED_KID_CHARS], host=jwks_host(self.url), keys=len(self._keys)
                )
        return self._keys.get(kid) if self._usable() else None

    async def refresh(self) -> bool:
        """Fetch the key set once; on failure keep the last good one. True if it was replaced."""
        async with self._lock:
            return await self._fetch()

    async def _fetch(self) -> bool:
        """One fetch; the caller holds the lock."""
        self._last_attempt = self._clock()
        self.refreshes += 1
        try:
            keys = await self._download()
        except JwksFailure as exc:
            self.failures += 1
            self._failing = True
            log.warning(
                "jwks_refresh_failed",
                reason=exc.reason,
                status=exc.status,
                error=exc.error,
                host=jwks_host(self.url),
                last_good_seconds_ago=self._age(),
            )
            self._report(ok=False)
            return False
        self._keys = keys
        self._fetched_at = self._clock()
        self._failing = False
        self._report(ok=True)
        return True

    async def _download(self) -> dict[str, SigningKey]:
        """The usable keys the JWKS URL serves now; JwksFailure says why there are none."""
        try:
            response = await self._client.get(self.url, headers={"accept": "application/json"})
        except httpx.TimeoutException as exc:
            raise JwksFailure("timeout", error=type(exc).__name__) from exc
        except httpx.ConnectError as exc:
            raise JwksFailure(_connect_reason(exc), error=type(exc).__name__) from exc
        except httpx.HTTPError as exc:
            raise JwksFailure("transport_error", error=type(exc).__name__) from exc
        if response.status_code != 200:
            raise JwksFailure("http_status", status=response.status_code)
        try:
            document = response.json()
        except ValueError as exc:
            raise JwksFailure("invalid_json") from exc
        try:
            keys = self._parse(document)
        except ValueError as exc:
            raise JwksFailure("not_a_jwk_set") from exc
        if not keys:
            raise JwksFailure("no_usable_keys")
        return keys

    def _age(self) -> float | None:
        """Seconds since the last good fetch, None if there was none."""
        return None if self._fetched_at is None else round(self._clock() - self._fetched_at, 1)

    def _report(self, *, ok: bool) -> None:
        if self._on_refresh is not None:
            self._on_refresh(ok=ok)

    def _usable(self) -> bool:
        return self._fetched_at is not None and self._clock() - self._fetched_at < self._max_stale

    def _parse(self, document: Any) -> dict[str, SigningKey]:
        if not isinstance(document, Mapping) or not isinstance(document.get("keys"), list):
            raise ValueError("not a JWK set")
        keys: dict[str, SigningKey] = {}
        for jwk in document["keys"]:
            key = self._signing_key(jwk)
            if key is not None:
                keys[key.kid] = key
        return keys

    def _signing_key(self, jwk: Any) -> SigningKey | None:
        if not isinstance(jwk, Mapping) or not isinstance(jwk.get("kid"), str):
            return None
        if jwk.get("use", "sig") != "sig":
            return None
        algorithm = jwk.get("alg") or next((a for a in self._algorithms if ASYMMETRIC[a] == jwk.get("kty")), None)
        # The key's type must match its algorithm: this is what rules out HS256-with-a-public-key.
        if algorithm not in self._algorithms or ASYMMETRIC.get(algorithm) != jwk.get("kty"):
            return None
        try:
            parsed = jwt.PyJWK(dict(jwk), algorithm=algorithm)
        except (jwt.PyJWKError, jwt.InvalidKeyError, ValueError, TypeError):
            return None
        return SigningKey(kid=jwk["kid"], algorithm=algorithm, key=parsed.key)


def jwks_host(url: str) -> str:
    """`host[:port]` of the JWKS URL: no user info, path or query string (a secret could hide there)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return "?"
    host = parts.hostname or "?"
    # An IPv6 address keeps its brackets (RFC 3986 §3.2.2): `::1:8443` would read as an address.
    if ":" in host:
        host = f"[{host}]"
    return f"{host}:{port}" if port is not None else host


def _connect_reason(exc: BaseException) -> str:
    """`connection_refused`, `dns_failed`, `tls_failed` or `connect_failed`, from the OS error under httpx's."""
    seen: BaseException | None = exc
    for _ in range(8):  # a chain is a few links long; a cycle must not hold the refresh
        if seen is None:
            break
        for kind, reason in CONNECT_CAUSES:
            if isinstance(seen, kind):
                return reason
        seen = seen.__cause__ or seen.__context__
    return "connect_failed"
