"""Assemble the token verifier from settings: which key sources and token kinds are trusted.

Production: the corporate JWKS (RS256/ES256; PS256/EdDSA when allowed) and, when configured, opaque tokens (allow-list,
introspection). Development mode adds the development issuer's key and, if configured, an HS256
secret; `safeguards.check_safety` has already refused both outside development mode.

The settings it reads are declared below as `AuthInputs` rather than imported: auth sits below the
settings that gather its section (docs/architecture.md, "Layers"), and aql_mcp.settings.Settings
is what the application passes.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import httpx

from aql_mcp.auth.dev_issuer import DevIssuer
from aql_mcp.auth.jwks import JwksKeySource, SigningKey
from aql_mcp.auth.opaque import OpaqueTokens, read_allow_list
from aql_mcp.auth.settings import AuthSettings
from aql_mcp.auth.token_introspection import IntrospectionLimits, Introspector
from aql_mcp.auth.tokens import BearerVerifier
from aql_mcp.exceptions import ConfigError

HTTP_TIMEOUT = httpx.Timeout(5.0)


class _DevMode(Protocol):
    @property
    def dev(self) -> bool: ...


class AuthInputs(Protocol):
    """What the verifier is built from: the `auth` section, development mode and the expected claims."""

    @property
    def auth(self) -> AuthSettings: ...
    @property
    def server(self) -> _DevMode: ...
    @property
    def issuer(self) -> str: ...
    @property
    def audience(self) -> str: ...


@dataclass(frozen=True, slots=True)
class Authentication:
    verifier: BearerVerifier
    jwks: JwksKeySource | None
    client: httpx.AsyncClient


def build_authentication(
    settings: AuthInputs,
    dev_issuer: DevIssuer | None,
    *,
    on_refresh: Callable[..., None] | None = None,
    on_introspection: Callable[[str], None] | None = None,
    on_limit: Callable[[str], None] | None = None,
) -> Authentication:
    auth = settings.auth
    # The IdP is called for keys and introspection only; the caller's token is never forwarded
    # to another resource server (no token passthrough, corporate §7.3).
    client = httpx.AsyncClient(timeout=HTTP_TIMEOUT, follow_redirects=False, verify=_trust(auth.ca_bundle))
    static: dict[str, SigningKey] = {}
    if dev_issuer is not None:
        static[dev_issuer.kid] = SigningKey(dev_issuer.kid, "ES256", dev_issuer.public_key)
    if settings.server.dev and auth.hs256_secret is not None and "HS256" in auth.algorithms:
        static[""] = SigningKey("", "HS256", auth.hs256_secret.get_secret_value().encode("utf-8"))
    jwks = None
    if auth.jwks_url:
        jwks = JwksKeySource(
            auth.jwks_url,
            client=client,
            algorithms=auth.algorithms,
            ttl=auth.jwks_ttl_seconds,
            cooldown=auth.jwks_refetch_cooldown_seconds,
            max_stale=auth.jwks_max_stale_seconds,
            on_refresh=on_refresh,
        )
    verifier = BearerVerifier(
        issuer=settings.issuer,
        audience=settings.audience,
        static_keys=static,
        jwks=jwks,
        opaque=_opaque(settings),
        introspector=_introspector(settings, client, on_call=on_introspection, on_refusal=on_limit),
        leeway=auth.clock_skew_seconds,
    )
    return Authentication(verifier, jwks, client)


def _trust(ca_bundle: Path | None) -> ssl.SSLContext:
    """TLS verification for the IdP: the system's CAs, and the private CA bundle when one is set."""
    context = ssl.create_default_context()
    if ca_bundle is not None:
        try:
            context.load_verify_locations(cafile=ca_bundle)
        except (OSError, ssl.SSLError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not a PEM bundle of certificates"
            raise ConfigError(f"auth.ca_bundle (AQL_MCP_AUTH__CA_BUNDLE): cannot be used ({reason})") from None
    return context


def _opaque(settings: AuthInputs) -> OpaqueTokens | None:
    entries = {d: (t.sub, t.scopes) for d, t in settings.auth.opaque_tokens.items()}
    if settings.auth.opaque_tokens_file is not None:
        entries.update(read_allow_list(settings.auth.opaque_tokens_file))
    return OpaqueTokens(entries) if entries else None


def _introspector(
    settings: AuthInputs,
    client: httpx.AsyncClient,
    *,
    on_call: Callable[[str], None] | None,
    on_refusal: Callable[[str], None] | None,
) -> Introspector | None:
    auth = settings.auth
    if not (auth.introspection_url and auth.introspection_client_id and auth.introspection_client_secret):
        return None
    limits = IntrospectionLimits(
        cache_seconds=auth.introspection_cache_seconds,
        negative_seconds=auth.introspection_negative_cache_seconds,
        negative_size=auth.introspection_negative_cache_size,
        rate_per_second=auth.introspection_rate_per_second,
        burst=auth.introspection_rate_burst,
    )
    return Introspector(
        auth.introspection_url,
        client=client,
        client_id=auth.introspection_client_id,
        client_secret=auth.introspection_client_secret.get_secret_value(),
        limits=limits,
        on_call=on_call,
        on_refusal=on_refusal,
    )
