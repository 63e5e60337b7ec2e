"""RFC 7662 token introspection, guarded so that unauthenticated traffic cannot drive the IdP.

Introspection asks the IdP about an opaque token it issued; that is not token passthrough
(corporate §7.3): no resource server downstream ever receives the caller's token. Anyone can send
a random bearer token, though, and each unknown one would cost an IdP call. Four guards:

- Answers are remembered by the token's SHA-256 digest, never the token: an active token until
  `cache_seconds` or its `exp`, an inactive one for `negative_seconds` (the negative cache), each
  cache bounded in entries, oldest forgotten first.
- Concurrent requests with the same unknown token share one IdP call (single flight).
- The replica spends from a budget of IdP calls (a token bucket, `rate_per_second` + `burst`).
  When it is spent, an unknown token is not judged: 503 + `Retry-After` (-32006,
  `IntrospectionBudgetSpent`), never 401. A 401 `invalid_token` would be a lie about a token that
  may be valid (RFC 6750 §3.1: expired, revoked, malformed or otherwise invalid); a legitimate
  client would discard it and fetch a new one from the IdP, which is the load the budget holds
  off, and would get the same answer for the new one. 503 + Retry-After is the corporate code for
  "a dependency is unavailable" (Appendix B, -32006), the same answer as an IdP that is down, and
  the client keeps its token and retries. Tokens already known (cached active) keep working during
  an attack; a new legitimate token competes with the attack for the refill and gets through on a
  retry once the attack's share drops. The attacker learns nothing either way.
- A failure of the IdP (unreachable, timeout, 5xx, not JSON) is 503 + Retry-After too, and is
  never remembered as "inactive": the next request asks again (within the budget).

Log lines carry outcomes and counts, never a token or a digest of one.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
import orjson
import structlog

from aql_mcp.auth.cache import TtlCache
from aql_mcp.auth.claims import INTROSPECTION_MAPPING, ClaimMapping
from aql_mcp.auth.principal import Principal
from aql_mcp.bucket import TokenBucket
from aql_mcp.exceptions import IntrospectionBudgetSpent, InvalidToken, RetryLater

log = structlog.get_logger("aql_mcp.auth")

ACTIVE_CACHE_SIZE = 10_000
# What a client is told to wait when the IdP failed (503 + Retry-After, -32006).
IDP_RETRY_AFTER = 5
# A spent budget is logged at most this often, with the count of refusals since (no log flood).
REFUSAL_LOG_INTERVAL = 60.0


@dataclass(frozen=True, slots=True)
class IntrospectionLimits:
    """How long answers are remembered and how many IdP calls a replica may make (`auth.*` settings)."""

    cache_seconds: float = 60.0
    negative_seconds: float = 60.0
    negative_size: int = 10_000
    rate_per_second: float = 20.0
    burst: int = 40


def _ignore(_: str) -> None:
    return None


class Introspector:
    """Asks the IdP whether an opaque token is active, within the replica's budget of calls.

    `on_call(result)` counts every IdP call (`active`, `inactive`, `failed`); `on_refusal(kind)`
    every token refused because the budget was spent (`introspection`).
    """

    def __init__(
        self,
        url: str,
        *,
        client: httpx.AsyncClient,
        client_id: str,
        client_secret: str,
        limits: IntrospectionLimits,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        on_call: Callable[[str], None] | None = None,
        on_refusal: Callable[[str], None] | None = None,
        mapping: ClaimMapping = INTROSPECTION_MAPPING,
        audiences: tuple[str, ...] = (),
    ) -> None:
        self._url = url
        self._mapping = mapping
        self._audiences = frozenset(audiences)
        self._client = client
        self._auth = httpx.BasicAuth(client_id, client_secret)
        self._limits = limits
        self._clock = clock
        self._monotonic = monotonic
        self._on_call = on_call or _ignore
        self._on_refusal = on_refusal or _ignore
        self._active: TtlCache[Principal] = TtlCache(ACTIVE_CACHE_SIZE)
        self._inactive: TtlCache[bool] = TtlCache(limits.negative_size)
        self._flights: dict[bytes, asyncio.Task[Principal | None]] = {}
        self._budget = TokenBucket(capacity=limits.burst, rate=limits.rate_per_second, now=monotonic())
        self._refused = 0
        self._refusal_logged = -math.inf

    async def introspect(self, token: str) -> Principal:
        key = hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()
        now = self._clock()
        known = self._active.get(key, now)
        if known is not None:
            return known
        if self._inactive.get(key, now):
            raise InvalidToken()
        flight = self._flights.get(key)
        if flight is None:
            self._spend()
            flight = asyncio.ensure_future(self._settle(key, token))
            flight.add_done_callback(_retrieve)
            self._flights[key] = flight
        # Shielded: a caller that goes away does not cancel the answer the others wait for.
        principal = await asyncio.shield(flight)
        if principal is None:
            raise InvalidToken()
        return principal

    def _spend(self) -> None:
        now = self._monotonic()
        wait = self._budget.take(now)
        if wait <= 0:
            return
        self._on_refusal("introspection")
        self._refused += 1
        if now - self._refusal_logged >= REFUSAL_LOG_INTERVAL:
            log.warning("introspection_budget_spent", refused=self._refused, rate=self._limits.rate_per_second)
            self._refusal_logged, self._refused = now, 0
        raise IntrospectionBudgetSpent(retry_after=max(1, math.ceil(wait)))

    async def _settle(self, key: bytes, token: str) -> Principal | None:
        """One IdP call; its verdict is remembered, a failure is not."""
        try:
            principal = await self._ask(token)
        finally:
            self._flights.pop(key, None)
        now = self._clock()
        if principal is None:
            if self._limits.negative_seconds > 0:
                self._inactive.put(key, True, now + self._limits.negative_seconds)
            return None
        until = now + self._limits.cache_seconds
        if principal.expires_at is not None:
            until = min(until, principal.expires_at)
        if until > now:
            self._active.put(key, principal, until)
        return principal

    async def _ask(self, token: str) -> Principal | None:
        try:
            response = await self._client.post(
                self._url, data={"token": token, "token_type_hint": "access_token"}, auth=self._auth
            )
            response.raise_for_status()
            answer = orjson.loads(response.content)
        except (httpx.HTTPError, orjson.JSONDecodeError) as exc:
            self._on_call("failed")
            log.warning("introspection_failed", error=type(exc).__name__)
            raise RetryLater(
                "Service unavailable: the token could not be checked", retry_after=IDP_RETRY_AFTER
            ) from None
        principal = self._principal(answer)
        self._on_call("inactive" if principal is None else "active")
        return principal

    def _principal(self, answer: Any) -> Principal | None:
        """RFC 7662 §2.2: only `active: true` with a subject counts; a token past its `exp` is inactive
        whatever it says. The caller is read with the issuer's claim mapping (`sub` and `scope` by
        default); an answer with a malformed `act` counts as inactive. `sub` is optional there: a
        client's own token (client credentials, RFC 6749 §4.4) may carry only `client_id`, which is then
        its subject, as in the IdP's JWTs (RFC 9068 §2.2)."""
        if not isinstance(answer, dict) or answer.get("active") is not True:
            return None
        if self._mapping.subject == "sub" and "sub" not in answer and isinstance(answer.get("client_id"), str):
            answer = {**answer, "sub": answer["client_id"]}
        exp = answer.get("exp")
        if isinstance(exp, bool) or not isinstance(exp, int | float | None):
            return None
        if exp is not None and exp <= self._clock():
            return None
        if not self._meant_for_us(answer.get("aud")):
            return None
        try:
            return self._mapping.principal(answer, expires_at=float(exp) if exp is not None else None)
        except InvalidToken:
            return None

    def _meant_for_us(self, aud: Any) -> bool:
        """RFC 7662 §4: an active token the IdP issued for another resource server must not be
        accepted here. An answer that names its audience (a string or a list, as in a JWT) must name
        one of ours; an answer without `aud` is taken as the IdP's word for this resource server,
        whose credentials asked."""
        if aud is None or not self._audiences:
            return True
        named = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []
        return any(isinstance(value, str) and value in self._audiences for value in named)


def _retrieve(flight: asyncio.Task[Principal | None]) -> None:
    """Every caller may have gone away: read the failure so asyncio does not log it as unretrieved."""
    if not flight.cancelled():
        flight.exception()
