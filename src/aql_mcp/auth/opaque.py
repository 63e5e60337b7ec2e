"""Opaque bearer tokens (corporate Appendix A.3): an allow-list of digests, or RFC 7662 introspection.

The allow-list holds SHA-256 digests, never tokens, so the settings and files that carry it hold
no secret. Introspection asks the IdP about a token it issued; that is not token passthrough
(corporate §7.3): no resource server downstream ever receives the caller's token.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import httpx
import orjson
import structlog
import yaml

from aql_mcp.auth.principal import Principal
from aql_mcp.exceptions import ConfigError, InvalidToken, UpstreamUnavailable

log = structlog.get_logger("aql_mcp.auth")
NEGATIVE_CACHE_SECONDS = 10.0
HEX_DIGEST = re.compile(r"[0-9a-f]{64}")


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).hexdigest()


class OpaqueTokens:
    """An allow-list: digest -> (subject, scopes)."""

    def __init__(self, entries: Mapping[str, tuple[str, tuple[str, ...]]]) -> None:
        self._entries = {d: Principal(subject=sub, scopes=frozenset(scopes)) for d, (sub, scopes) in entries.items()}

    def __len__(self) -> int:
        return len(self._entries)

    def lookup(self, token: str) -> Principal | None:
        return self._entries.get(digest(token))


def read_allow_list(path: Path) -> dict[str, tuple[str, tuple[str, ...]]]:
    """`{digest: {sub, scopes}}` from a YAML or JSON file (a mounted secret, say)."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(
            f"auth.opaque_tokens_file (AQL_MCP_AUTH__OPAQUE_TOKENS_FILE): cannot be read ({exc})"
        ) from None
    refusal = ConfigError(
        "auth.opaque_tokens_file (AQL_MCP_AUTH__OPAQUE_TOKENS_FILE): expected a mapping of SHA-256 hex "
        "digests (never tokens) to {sub: string, scopes: [strings]}"
    )
    if not isinstance(data, dict):
        raise refusal
    entries: dict[str, tuple[str, tuple[str, ...]]] = {}
    for key, value in data.items():
        scopes = value.get("scopes", []) if isinstance(value, dict) else None
        if not (
            isinstance(key, str)
            and HEX_DIGEST.fullmatch(key.lower())
            and isinstance(value, dict)
            and isinstance(value.get("sub"), str)
            and isinstance(scopes, list)
        ):
            raise refusal
        entries[key.lower()] = (value["sub"], tuple(str(s) for s in scopes))
    return entries


class Introspector:
    """RFC 7662 token introspection with a short cache, positive and negative."""

    def __init__(
        self,
        url: str,
        *,
        client: httpx.AsyncClient,
        client_id: str,
        client_secret: str,
        cache_seconds: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._url = url
        self._client = client
        self._auth = httpx.BasicAuth(client_id, client_secret)
        self._cache_seconds = cache_seconds
        self._clock = clock
        self._cache: dict[str, tuple[float, Principal | None]] = {}

    async def introspect(self, token: str) -> Principal:
        key = digest(token)
        now = self._clock()
        cached = self._cache.get(key)
        if cached is not None and cached[0] > now:
            if cached[1] is None:
                raise InvalidToken()
            return cached[1]
        principal = await self._ask(token)
        until = now + (self._cache_seconds if principal else NEGATIVE_CACHE_SECONDS)
        if principal is not None and principal.expires_at is not None:
            until = min(until, principal.expires_at)
        if len(self._cache) > 10_000:
            self._cache = {k: v for k, v in self._cache.items() if v[0] > now}
        self._cache[key] = (until, principal)
        if principal is None:
            raise InvalidToken()
        return principal

    async def _ask(self, token: str) -> Principal | None:
        try:
            response = await self._client.post(
                self._url, data={"token": token, "token_type_hint": "access_token"}, auth=self._auth
            )
            response.raise_for_status()
            answer = orjson.loads(response.content)
        except (httpx.HTTPError, orjson.JSONDecodeError) as exc:
            log.warning("introspection_failed", error=type(exc).__name__)
            raise UpstreamUnavailable("Service unavailable: the token could not be checked") from None
        if not isinstance(answer, dict) or answer.get("active") is not True or not isinstance(answer.get("sub"), str):
            return None
        exp = answer.get("exp")
        if isinstance(exp, int | float) and exp <= self._clock():
            return None
        scope = answer.get("scope", "")
        return Principal(
            subject=answer["sub"],
            scopes=frozenset(scope.split() if isinstance(scope, str) else ()),
            expires_at=float(exp) if isinstance(exp, int | float) else None,
        )
