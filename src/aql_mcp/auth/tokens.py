"""Bearer token verification: JWTs by their key sources, opaque tokens by allow-list or introspection.

`verify` returns a Principal or raises InvalidToken; the auth middleware answers. Verified
tokens are cached by their SHA-256 until they expire, so the hot path checks no signature per
call. The algorithm comes from the key, never from the token alone: a token's `alg` must equal
the algorithm its key is for, so `none` and HS256-signed-with-a-public-key never verify.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import jwt

from aql_mcp.auth.cache import TtlCache
from aql_mcp.auth.jwks import JwksKeySource, SigningKey
from aql_mcp.auth.opaque import OpaqueTokens
from aql_mcp.auth.principal import Principal
from aql_mcp.auth.token_introspection import Introspector
from aql_mcp.exceptions import InvalidToken, MissingToken, RetryLater

CACHE_LIMIT = 10_000
# What a client is told to wait while no usable key set is held: the refresher retries within 30 s.
JWKS_RETRY_AFTER = 5
KEYS_UNAVAILABLE = "Service unavailable: the token could not be checked"
REQUIRED_CLAIMS = ["exp", "iss", "aud", "sub"]


class TokenVerifier(Protocol):
    async def verify(self, token: str) -> Principal: ...


class BearerVerifier:
    """Every configured token source behind one `verify`."""

    def __init__(
        self,
        *,
        issuer: str,
        audience: str,
        static_keys: Mapping[str, SigningKey] | None = None,
        jwks: JwksKeySource | None = None,
        opaque: OpaqueTokens | None = None,
        introspector: Introspector | None = None,
        leeway: int = 30,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._issuer = issuer
        self._audience = audience
        self._static = dict(static_keys or {})
        self._jwks = jwks
        self._opaque = opaque
        self._introspector = introspector
        self._leeway = leeway
        self._clock = clock
        self._cache = TtlCache[Principal](CACHE_LIMIT)
        self._verifies_jwts = bool(self._static) or jwks is not None

    async def verify(self, token: str) -> Principal:
        key = hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()
        now = self._clock()
        cached = self._cache.get(key, now)
        if cached is not None:
            return cached
        if token.count(".") != 2 or not self._verifies_jwts:
            # Opaque tokens are not cached here: the allow-list is a dict lookup, and
            # introspection keeps its own, shorter cache so a revocation is seen in time. A
            # JWT-shaped token goes to introspection only where no key source verifies JWTs (an
            # IdP that issues JWTs but is configured through introspection alone); with a JWKS,
            # a forged or foreign JWT is refused here and never costs an IdP call.
            return await self._verify_opaque(token)
        principal = await self._verify_jwt(token)
        if principal.expires_at is not None:
            self._cache.put(key, principal, until=principal.expires_at + self._leeway)
        return principal

    async def _verify_jwt(self, token: str) -> Principal:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise InvalidToken() from None
        kid = header.get("kid")
        kid = kid if isinstance(kid, str) else ""
        signing = await self._key(kid)
        if signing is None and kid and self._jwks is not None and self._jwks.status() == "unavailable":
            # No usable key set (never fetched, or older than max_stale): the token cannot be judged.
            # A 401 would make the client discard a token that may be good; 503 + Retry-After keeps it,
            # as introspection answers when the IdP cannot be asked (docs/errors.md).
            raise RetryLater(KEYS_UNAVAILABLE, retry_after=JWKS_RETRY_AFTER)
        if signing is None or header.get("alg") != signing.algorithm:
            raise InvalidToken()
        return decode(
            token, signing, issuer=self._issuer, audience=self._audience, leeway=self._leeway, now=self._clock()
        )

    async def _key(self, kid: str) -> SigningKey | None:
        found = self._static.get(kid)
        if found is None and self._jwks is not None and kid:
            found = await self._jwks.key(kid)
        return found

    async def _verify_opaque(self, token: str) -> Principal:
        principal = self._opaque.lookup(token) if self._opaque is not None else None
        if principal is not None:
            return principal
        if self._introspector is not None:
            return await self._introspector.introspect(token)
        raise InvalidToken()


def decode(token: str, signing: SigningKey, *, issuer: str, audience: str, leeway: int, now: float) -> Principal:
    """Check the signature with the key's own algorithm, then the claims (Appendix A.1)."""
    try:
        claims = jwt.decode(
            token,
            signing.key,
            algorithms=[signing.algorithm],
            audience=audience,
            issuer=issuer,
            # Times are checked below against the verifier's clock, the same one its cache uses.
            options={"require": REQUIRED_CLAIMS, "verify_exp": False, "verify_nbf": False, "verify_iat": False},
        )
    except jwt.PyJWTError:
        raise InvalidToken() from None
    check_times(claims, now=now, leeway=leeway)
    return principal_from(claims)


def check_times(claims: dict[str, Any], *, now: float, leeway: float) -> None:
    """`exp` required, `nbf` and `iat` checked when present, with the clock-skew allowance (Appendix A.1)."""
    exp = numeric_date(claims.get("exp"))
    nbf = numeric_date(claims.get("nbf", now))
    iat = numeric_date(claims.get("iat", now))
    if exp <= now - leeway or nbf > now + leeway or iat > now + leeway:
        raise InvalidToken()
    if not isinstance(claims.get("sub"), str):
        raise InvalidToken()


def numeric_date(value: Any) -> float:
    """A JSON number of seconds (RFC 7519 §2, NumericDate): a string or a boolean is refused, not
    converted (`float("9999999999")` would have accepted a string `exp`)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidToken()
    return float(value)


def principal_from(claims: dict[str, Any]) -> Principal:
    """Scopes from `scope` (space separated) or `scp` (a list or a string)."""
    scope = claims.get("scope", claims.get("scp", ""))
    scopes = scope.split() if isinstance(scope, str) else [str(s) for s in scope] if isinstance(scope, list) else []
    return Principal(
        subject=str(claims["sub"]), scopes=frozenset(scopes), expires_at=float(claims["exp"]), claims=claims
    )


def bearer_credential(value: str | None) -> str:
    """The token of an `Authorization: Bearer <token>` header value (RFC 6750 §2.1); the one parser
    for `/mcp` and the operator console."""
    if not value:
        raise MissingToken()
    scheme, _, token = value.partition(" ")
    if scheme.lower() != "bearer":
        # Other schemes carry no bearer credentials: challenge without an error code (RFC 6750 §3.1).
        raise MissingToken()
    if not token.strip():
        raise InvalidToken()
    return token.strip()
