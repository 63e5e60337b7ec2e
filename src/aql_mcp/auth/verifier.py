"""Assemble the token verifier from settings: which key sources and token kinds are trusted.

Production: the corporate JWKS (RS256/ES256; PS256/EdDSA when allowed) and, when configured, opaque tokens (allow-list,
introspection), and each further issuer of `auth.issuers` with its own JWKS or introspection endpoint,
audiences, algorithms and claim mapping (docs/identity.md). Development mode adds the development
issuer's key and, if configured, an HS256 secret; `safeguards.check_safety` has already refused both
outside development mode.

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

from aql_mcp.auth.claims import ClaimMapping
from aql_mcp.auth.delegation import DelegationRules
from aql_mcp.auth.dev_issuer import DevIssuer
from aql_mcp.auth.jwks import JwksKeySource, SigningKey
from aql_mcp.auth.opaque import OpaqueTokens, read_allow_list
from aql_mcp.auth.settings import AuthSettings, TrustedIssuer
from aql_mcp.auth.token_introspection import IntrospectionLimits, Introspector
from aql_mcp.auth.tokens import BearerVerifier, Issuer
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
    """The verifier, and the key sets the lifespan keeps fresh and readiness reports (the
    single-issuer JWKS first, then each listed issuer's)."""

    verifier: BearerVerifier
    key_sources: tuple[JwksKeySource, ...]
    client: httpx.AsyncClient


@dataclass(frozen=True, slots=True)
class _Hooks:
    """What the key sources and introspectors report to the metrics."""

    on_refresh: Callable[..., None] | None
    on_introspection: Callable[[str], None] | None
    on_limit: Callable[[str], None] | None


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
    hooks = _Hooks(on_refresh, on_introspection, on_limit)
    jwks = _key_source(auth, auth.jwks_url, auth.algorithms, client, hooks) if auth.jwks_url else None
    listed = tuple(_listed(auth, entry, client, hooks) for entry in auth.issuers)
    verifier = BearerVerifier(
        issuer=settings.issuer,
        audience=settings.audience,
        static_keys=static,
        jwks=jwks,
        opaque=_opaque(settings),
        introspector=_introspector(settings, client, on_call=on_introspection, on_refusal=on_limit),
        leeway=auth.clock_skew_seconds,
        issuers=listed,
        delegation=DelegationRules(require=auth.delegation.require, refuse=auth.delegation.refuse),
    )
    sources = ((jwks,) if jwks is not None else ()) + tuple(i.jwks for i in listed if i.jwks is not None)
    return Authentication(verifier, sources, client)


def _key_source(
    auth: AuthSettings, url: str, algorithms: tuple[str, ...], client: httpx.AsyncClient, hooks: _Hooks
) -> JwksKeySource:
    return JwksKeySource(
        url,
        client=client,
        algorithms=algorithms,
        ttl=auth.jwks_ttl_seconds,
        cooldown=auth.jwks_refetch_cooldown_seconds,
        max_stale=auth.jwks_max_stale_seconds,
        on_refresh=hooks.on_refresh,
    )


def _listed(auth: AuthSettings, entry: TrustedIssuer, client: httpx.AsyncClient, hooks: _Hooks) -> Issuer:
    """One `auth.issuers` entry: its key set or its introspection endpoint, and its claim mapping,
    whose namespace qualifies its callers by the issuer (auth/principal.py)."""
    claims = entry.claims
    mapping = ClaimMapping(subject=claims.subject, tenant=claims.tenant, scopes=claims.scopes, namespace=entry.issuer)
    jwks = _key_source(auth, entry.jwks_url, entry.algorithms, client, hooks) if entry.jwks_url else None
    introspector = None
    if entry.introspection_url and entry.introspection_client_id and entry.introspection_client_secret:
        introspector = Introspector(
            entry.introspection_url,
            client=client,
            client_id=entry.introspection_client_id,
            client_secret=entry.introspection_client_secret.get_secret_value(),
            limits=_limits(auth),
            on_call=hooks.on_introspection,
            on_refusal=hooks.on_limit,
            mapping=mapping,
            audiences=entry.audiences,
        )
    return Issuer(entry.issuer, entry.audiences, mapping, jwks=jwks, introspector=introspector)


def _limits(auth: AuthSettings) -> IntrospectionLimits:
    return IntrospectionLimits(
        cache_seconds=auth.introspection_cache_seconds,
        negative_seconds=auth.introspection_negative_cache_seconds,
        negative_size=auth.introspection_negative_cache_size,
        rate_per_second=auth.introspection_rate_per_second,
        burst=auth.introspection_rate_burst,
    )


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
    limits = _limits(auth)
    return Introspector(
        auth.introspection_url,
        client=client,
        client_id=auth.introspection_client_id,
        client_secret=auth.introspection_client_secret.get_secret_value(),
        limits=limits,
        on_call=on_call,
        on_refusal=on_refusal,
        audiences=(settings.audience,),
    )
