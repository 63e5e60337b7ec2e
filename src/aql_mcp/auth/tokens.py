"""Bearer token verification: JWT signature, issuer, audience and times, cached until `exp`.

`verify` is pure: it returns a Principal or raises InvalidToken; the auth middleware answers.
Verified tokens are cached by their SHA-256 until they expire, so the hot path does not check
a signature per call.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import jwt

from aql_mcp.auth.principal import Principal
from aql_mcp.exceptions import InvalidToken

CACHE_LIMIT = 10_000


class TokenVerifier(Protocol):
    def verify(self, token: str) -> Principal: ...


class JwtVerifier:
    """Verifies JWTs against a fixed key set (the development issuer's; JWKS comes next)."""

    def __init__(
        self,
        *,
        keys: Mapping[str, Any],
        issuer: str,
        audience: str,
        algorithms: tuple[str, ...] = ("ES256",),
        leeway: int = 30,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._keys = dict(keys)
        self._issuer = issuer
        self._audience = audience
        self._algorithms = list(algorithms)
        self._leeway = leeway
        self._clock = clock
        self._cache: dict[bytes, Principal] = {}

    def verify(self, token: str) -> Principal:
        digest = hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()
        cached = self._cache.get(digest)
        now = self._clock()
        if cached is not None and cached.expires_at is not None and cached.expires_at > now - self._leeway:
            return cached
        principal = self._decode(token)
        if len(self._cache) >= CACHE_LIMIT:
            self._cache = {k: p for k, p in self._cache.items() if p.expires_at and p.expires_at > now}
            if len(self._cache) >= CACHE_LIMIT:
                self._cache.clear()
        self._cache[digest] = principal
        return principal

    def _decode(self, token: str) -> Principal:
        try:
            header = jwt.get_unverified_header(token)
            key = self._keys.get(str(header.get("kid")))
            if key is None:
                raise InvalidToken()
            claims = jwt.decode(
                token,
                key,
                algorithms=self._algorithms,
                audience=self._audience,
                issuer=self._issuer,
                # Times are checked below against the injected clock, the same one the cache uses.
                options={
                    "require": ["exp", "iss", "aud", "sub"],
                    "verify_exp": False,
                    "verify_nbf": False,
                    "verify_iat": False,
                },
            )
        except jwt.PyJWTError:
            raise InvalidToken() from None
        check_times(claims, now=self._clock(), leeway=self._leeway)
        return principal_from(claims)


def check_times(claims: dict[str, Any], *, now: float, leeway: float) -> None:
    """`exp` required, `nbf` and `iat` checked when present, with the clock-skew allowance (Appendix A.1)."""
    try:
        exp = float(claims["exp"])
        nbf = float(claims.get("nbf", now))
        iat = float(claims.get("iat", now))
    except (TypeError, ValueError):
        raise InvalidToken() from None
    if exp <= now - leeway or nbf > now + leeway or iat > now + leeway:
        raise InvalidToken()


def principal_from(claims: dict[str, Any]) -> Principal:
    scope = claims.get("scope", claims.get("scp", ""))
    scopes = scope.split() if isinstance(scope, str) else [str(s) for s in scope] if isinstance(scope, list) else []
    return Principal(
        subject=str(claims["sub"]), scopes=frozenset(scopes), expires_at=float(claims["exp"]), claims=claims
    )
