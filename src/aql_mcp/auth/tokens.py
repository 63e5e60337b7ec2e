"""Bearer token verification: JWTs by their issuer's key sources, opaque tokens by allow-list or introspection.

`verify` returns a Principal or raises InvalidToken; the auth middleware answers. Verified
tokens are cached by their SHA-256 until they expire, so the hot path checks no signature per
call. The algorithm comes from the key, never from the token alone: a token's `alg` must equal
the algorithm its key is for, so `none` and HS256-signed-with-a-public-key never verify.

Several issuers may be trusted (`auth.issuers` beside the single-issuer settings, docs/identity.md).
A JWT's `iss` is read unverified only to pick its issuer; the token is then verified with that
issuer's keys, algorithms and audiences alone, so one issuer's keys never verify a token that
claims another, and an `iss` no entry names is `invalid_token`.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import jwt

from aql_mcp.auth.cache import TtlCache
from aql_mcp.auth.claims import DEFAULT_MAPPING, ClaimMapping
from aql_mcp.auth.delegation import DelegationRules
from aql_mcp.auth.jwks import JwksKeySource, SigningKey
from aql_mcp.auth.opaque import OpaqueTokens
from aql_mcp.auth.principal import Principal
from aql_mcp.auth.token_introspection import Introspector
from aql_mcp.exceptions import InvalidToken, MissingToken, RetryLater

CACHE_LIMIT = 10_000
# What a client is told to wait while no usable key set is held: the refresher retries within 30 s.
JWKS_RETRY_AFTER = 5
KEYS_UNAVAILABLE = "Service unavailable: the token could not be checked"
# The subject is required too, where the issuer's claim mapping says it is (auth/claims.py).
REQUIRED_CLAIMS = ["exp", "iss", "aud"]


class TokenVerifier(Protocol):
    async def verify(self, token: str) -> Principal: ...


@dataclass(frozen=True, slots=True)
class Issuer:
    """One trusted issuer: the `iss` it signs, the audiences it may address, its claim mapping and
    where its tokens are checked (signing keys, or introspection for an IdP configured that way)."""

    issuer: str
    audiences: tuple[str, ...]
    mapping: ClaimMapping = DEFAULT_MAPPING
    static_keys: Mapping[str, SigningKey] = field(default_factory=dict)
    jwks: JwksKeySource | None = None
    introspector: Introspector | None = None

    @property
    def verifies_jwts(self) -> bool:
        return bool(self.static_keys) or self.jwks is not None


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
        issuers: Sequence[Issuer] = (),
        delegation: DelegationRules | None = None,
    ) -> None:
        # The single-issuer settings are one issuer among the listed ones (`auth.issuers`).
        single = Issuer(issuer, (audience,), DEFAULT_MAPPING, dict(static_keys or {}), jwks, introspector)
        self._issuers = {single.issuer: single}
        for listed in issuers:
            if listed.issuer in self._issuers:
                raise ValueError(f"issuer {listed.issuer!r} is trusted twice")
            self._issuers[listed.issuer] = listed
        self._opaque = opaque
        # An opaque token names no issuer: it goes to the single-issuer introspection, or to the one
        # listed issuer configured by introspection when that is the only one (docs/identity.md).
        introspecting = [i.introspector for i in issuers if i.introspector is not None]
        self._introspector = introspector or (introspecting[0] if len(introspecting) == 1 else None)
        self._delegation = delegation or DelegationRules()
        self._leeway = leeway
        self._clock = clock
        self._cache = TtlCache[Principal](CACHE_LIMIT)
        self._verifies_jwts = any(i.verifies_jwts for i in self._issuers.values())

    async def verify(self, token: str) -> Principal:
        key = hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()
        now = self._clock()
        cached = self._cache.get(key, now)
        if cached is not None:
            return cached
        trusted = self._issuer_of(token) if token.count(".") == 2 else None
        if trusted is not None and trusted.verifies_jwts:
            principal = self._delegation.apply(await self._verify_jwt(token, trusted))
            if principal.expires_at is not None:
                self._cache.put(key, principal, until=principal.expires_at + self._leeway)
            return principal
        # Opaque tokens are not cached here: the allow-list is a dict lookup, and introspection
        # keeps its own, shorter cache so a revocation is seen in time. A JWT-shaped token goes to
        # introspection only where its issuer is configured through introspection alone, or where no
        # key source verifies JWTs at all; with a JWKS, a forged or foreign JWT is refused here and
        # never costs an IdP call.
        if trusted is not None and trusted.introspector is not None:
            return self._delegation.apply(await trusted.introspector.introspect(token))
        if token.count(".") == 2 and self._verifies_jwts:
            raise InvalidToken()
        return self._delegation.apply(await self._verify_opaque(token))

    def _issuer_of(self, token: str) -> Issuer | None:
        """The trusted issuer the token claims (its `iss`, read unverified), if any."""
        try:
            claims = jwt.decode(token, options={"verify_signature": False})
        except jwt.PyJWTError:
            return None
        issuer = claims.get("iss")
        return self._issuers.get(issuer) if isinstance(issuer, str) else None

    async def _verify_jwt(self, token: str, trusted: Issuer) -> Principal:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise InvalidToken() from None
        kid = header.get("kid")
        kid = kid if isinstance(kid, str) else ""
        signing = await _key(trusted, kid)
        if signing is None and kid and trusted.jwks is not None and trusted.jwks.status() == "unavailable":
            # No usable key set (never fetched, or older than max_stale): the token cannot be judged.
            # A 401 would make the client discard a token that may be good; 503 + Retry-After keeps it,
            # as introspection answers when the IdP cannot be asked (docs/errors.md).
            raise RetryLater(KEYS_UNAVAILABLE, retry_after=JWKS_RETRY_AFTER)
        if signing is None or header.get("alg") != signing.algorithm:
            raise InvalidToken()
        return decode(token, signing, trusted, leeway=self._leeway, now=self._clock())

    async def _verify_opaque(self, token: str) -> Principal:
        principal = self._opaque.lookup(token) if self._opaque is not None else None
        if principal is not None:
            return principal
        if self._introspector is not None:
            return await self._introspector.introspect(token)
        raise InvalidToken()


async def _key(trusted: Issuer, kid: str) -> SigningKey | None:
    found = trusted.static_keys.get(kid)
    if found is None and trusted.jwks is not None and kid:
        found = await trusted.jwks.key(kid)
    return found


def decode(token: str, signing: SigningKey, trusted: Issuer, *, leeway: int, now: float) -> Principal:
    """Check the signature with the key's own algorithm, then the claims (Appendix A.1) against the
    issuer the token claims, then read the caller out of them with that issuer's mapping."""
    try:
        claims = jwt.decode(
            token,
            signing.key,
            algorithms=[signing.algorithm],
            audience=list(trusted.audiences),
            issuer=trusted.issuer,
            # Times are checked below against the verifier's clock, the same one its cache uses.
            options={"require": REQUIRED_CLAIMS, "verify_exp": False, "verify_nbf": False, "verify_iat": False},
        )
    except jwt.PyJWTError:
        raise InvalidToken() from None
    check_times(claims, now=now, leeway=leeway)
    return trusted.mapping.principal(claims, expires_at=float(claims["exp"]))


def check_times(claims: dict[str, Any], *, now: float, leeway: float) -> None:
    """`exp` required, `nbf` and `iat` checked when present, with the clock-skew allowance (Appendix A.1)."""
    exp = numeric_date(claims.get("exp"))
    nbf = numeric_date(claims.get("nbf", now))
    iat = numeric_date(claims.get("iat", now))
    if exp <= now - leeway or nbf > now + leeway or iat > now + leeway:
        raise InvalidToken()


def numeric_date(value: Any) -> float:
    """A JSON number of seconds (RFC 7519 §2, NumericDate): a string or a boolean is refused, not
    converted (`float("9999999999")` would have accepted a string `exp`)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidToken()
    return float(value)


def principal_from(claims: dict[str, Any]) -> Principal:
    """The single-issuer settings' reading: `sub`, scopes from `scope` (space separated) or `scp`
    (a list or a string), and the `act` chain."""
    return DEFAULT_MAPPING.principal(claims, expires_at=float(claims["exp"]))


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
