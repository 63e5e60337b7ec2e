"""Refusals at startup: configurations that are only safe on a developer's machine.

`configuration.load_settings` calls `check_safety` once the settings are built; each refusal is a
`ConfigError` naming the setting and its variable (corporate §6, §7), so a replica that would run
unsafely never starts. Rules a single field can check alone stay validators in settings.py.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from aql_mcp.exceptions import ConfigError
from aql_mcp.settings import Settings


def check_safety(settings: Settings) -> None:
    """Refuse configurations that are only safe on a developer's machine (corporate §6, §7)."""
    if not settings.server.dev and "*" in settings.http.allowed_origins:
        raise ConfigError(
            "http.allowed_origins (AQL_MCP_HTTP__ALLOWED_ORIGINS): '*' is refused outside development mode; "
            "list the exact origins"
        )
    _check_token_sources(settings)
    _check_idp_transport(settings)
    _check_store(settings)
    _check_ports(settings)
    if not settings.server.dev and settings.discovery.server_card and not settings.server.public_url:
        # The card and the catalog name the URL clients connect to; the bind address is not one.
        raise ConfigError(
            "discovery.server_card (AQL_MCP_DISCOVERY__SERVER_CARD): the Server Card names the public MCP URL; "
            "set server.public_url (AQL_MCP_SERVER__PUBLIC_URL) to the URL clients reach"
        )
    if settings.server.dev and not _is_loopback(settings.server.host):
        raise ConfigError(
            f"server.host (AQL_MCP_SERVER__HOST): development mode binds to loopback only, not {settings.server.host!r}"
        )


def _check_token_sources(settings: Settings) -> None:
    """Where tokens are checked against: real keys outside development, and what each source needs."""
    auth = settings.auth
    if not settings.server.dev and ("HS256" in auth.algorithms or auth.hs256_secret is not None):
        raise ConfigError(
            "auth.algorithms (AQL_MCP_AUTH__ALGORITHMS): HS256 (a shared secret) is for local development "
            "only; use RS256 or ES256 keys from the corporate JWKS (corporate standard Appendix A.1)"
        )
    if "HS256" in auth.algorithms and auth.hs256_secret is None:
        raise ConfigError("auth.hs256_secret (AQL_MCP_AUTH__HS256_SECRET): HS256 is allowed but no secret is set")
    opaque = auth.opaque_tokens or auth.opaque_tokens_file or auth.introspection_url
    if not settings.server.dev and not (auth.jwks_url or opaque or auth.issuers):
        raise ConfigError(
            "auth.jwks_url (AQL_MCP_AUTH__JWKS_URL): no token source is configured; set the corporate JWKS "
            "URL (or opaque tokens, or auth.issuers), or start with --dev on a workstation (development issuer)"
        )
    for index, entry in enumerate(auth.issuers):
        if entry.issuer == settings.issuer:
            raise ConfigError(
                f"auth.issuers[{index}].issuer (AQL_MCP_AUTH__ISSUERS): {entry.issuer!r} is already the issuer of "
                "the single-issuer settings (auth.issuer, or the service's own URL); each issuer has one entry"
            )
    if not settings.server.dev and auth.jwks_url and not (auth.issuer and auth.audience):
        raise ConfigError(
            "auth.issuer (AQL_MCP_AUTH__ISSUER) and auth.audience (AQL_MCP_AUTH__AUDIENCE): both are required "
            "with auth.jwks_url, so every token is checked for who issued it and for whom"
        )
    if auth.introspection_url and not (auth.introspection_client_id and auth.introspection_client_secret):
        raise ConfigError(
            "auth.introspection_client_id / auth.introspection_client_secret (AQL_MCP_AUTH__INTROSPECTION_CLIENT_ID, "
            "AQL_MCP_AUTH__INTROSPECTION_CLIENT_SECRET): required with auth.introspection_url"
        )


def _check_store(settings: Settings) -> None:
    """The store's pool and password, and the key replicas sharing a PostgreSQL store sign with."""
    store = settings.store
    if store.is_postgres and store.pool_min_size > store.pool_max_size:
        raise ConfigError(
            "store.pool_min_size (AQL_MCP_STORE__POOL_MIN_SIZE): larger than store.pool_max_size "
            f"({store.pool_min_size} > {store.pool_max_size})"
        )
    if store.password is not None and store.password_file is not None:
        raise ConfigError(
            "store.password (AQL_MCP_STORE__PASSWORD) and store.password_file (AQL_MCP_STORE__PASSWORD_FILE): "
            "set one of them, not both"
        )
    if not settings.server.dev and store.is_postgres and settings.mcp.modern_era and not settings.mcp.request_state_key:
        # With PostgreSQL any replica may take a client's retry of an `input_required` answer, so
        # all of them must verify what one signed; SQLite is one replica, whose own random key will
        # do, and so may a developer's replicas (docs/eras.md).
        raise ConfigError(
            "mcp.request_state_key (AQL_MCP_MCP__REQUEST_STATE_KEY): required with mcp.modern_era and a "
            "PostgreSQL store; every replica must sign and verify input_required request state with the same "
            "key (mount it from a Secret), or set mcp.modern_era false"
        )


def _check_ports(settings: Settings) -> None:
    """The side ports (metrics, probes) each take a port of their own."""
    if settings.metrics.port is not None and settings.metrics.port == settings.server.port:
        raise ConfigError(
            "metrics.port (AQL_MCP_METRICS__PORT): must differ from server.port; leave it null to serve "
            "/metrics on the service port"
        )
    probes = settings.probes.port
    if probes is not None and probes in (settings.server.port, settings.metrics.port):
        raise ConfigError(
            "probes.port (AQL_MCP_PROBES__PORT): must differ from server.port and metrics.port; leave it null "
            "to serve /health and /ready on the service port only"
        )


def _check_idp_transport(settings: Settings) -> None:
    """The JWKS decides which signatures are trusted, and the introspection request carries the
    caller's token and this service's client secret: over plain http anyone on the path can swap the
    keys or read both. Outside development mode http needs the explicit `auth.allow_insecure_http`
    (a test IdP on loopback, say); the chart never sets it."""
    auth = settings.auth
    if settings.server.dev or auth.allow_insecure_http:
        return
    single = (("jwks_url", auth.jwks_url), ("introspection_url", auth.introspection_url))
    urls = [(f"auth.{name}", f"AQL_MCP_AUTH__{name.upper()}", url) for name, url in single]
    for index, entry in enumerate(auth.issuers):
        for name, url in (("jwks_url", entry.jwks_url), ("introspection_url", entry.introspection_url)):
            urls.append((f"auth.issuers[{index}].{name}", "AQL_MCP_AUTH__ISSUERS", url))
    for setting, variable, url in urls:
        if url and urlsplit(url).scheme == "http":
            raise ConfigError(
                f"{setting} ({variable}): plain http is refused outside development mode; "
                "use https, or set auth.allow_insecure_http (AQL_MCP_AUTH__ALLOW_INSECURE_HTTP) to true for an "
                "IdP you reach over a trusted path"
            )


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
