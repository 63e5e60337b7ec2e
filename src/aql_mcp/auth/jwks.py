"""Signing keys from the corporate JWKS endpoint, cached (corporate Appendix A.1: TTL <= 10 min).

The key set is refreshed in the background before its TTL runs out. A token whose `kid` is not
in the set triggers one refetch, at most once per cooldown, so a flood of bad tokens cannot
hammer the IdP. Keys the service cannot use (other key types, `use` other than `sig`, algorithms
outside the allow-list) are skipped, not fatal. When a refresh fails, the last good set keeps
serving until it is older than `max_stale`; readiness reports that as degraded.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
import httpx
import jwt
import structlog

log = structlog.get_logger("aql_mcp.jwks")

ASYMMETRIC = {"RS256": "RSA", "ES256": "EC"}


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
            await self._fetch()
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
            response = await self._client.get(self.url, headers={"accept": "application/json"})
            response.raise_for_status()
            keys = self._parse(response.json())
        except (httpx.HTTPError, ValueError) as exc:
            self.failures += 1
            self._failing = True
            log.warning("jwks_refresh_failed", error=type(exc).__name__)
            self._report(ok=False)
            return False
        self._keys = keys
        self._fetched_at = self._clock()
        self._failing = False
        self._report(ok=True)
        return True

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
