"""The console's routes, which the safety plugin offers the app (`SafetyPlugin.routes`; docs/console.md).

`/console` (the page), `/console/events` (its live stream), `/console/trail` (the audit trail) and
the decision forms, each behind the Host allow-list and the console guard (operator scope); in
development mode also the login form and sign-out. With `console.enabled` off there are no routes at all (404).
"""

from __future__ import annotations

from starlette.middleware import Middleware
from starlette.routing import BaseRoute, Route

from aql_mcp.plugin import (
    BearerVerifier,
    DevIssuer,
    HostMiddleware,
    Settings,
    SigningKey,
    Store,
    TokenVerifier,
    trail_log,
)
from aql_mcp.plugins.safety.console.actions import ACTIONS, Actions
from aql_mcp.plugins.safety.console.guard import ConsoleGuard
from aql_mcp.plugins.safety.console.login import DevLogin, console_audience
from aql_mcp.plugins.safety.console.page import ConsolePage
from aql_mcp.plugins.safety.console.session import LOGIN_PATH
from aql_mcp.plugins.safety.console.signout import SignOuts
from aql_mcp.plugins.safety.console.stream import LiveStream
from aql_mcp.plugins.safety.console.trail import TrailView
from aql_mcp.plugins.safety.desk import SafetyDesk
from aql_mcp.plugins.safety.tables import TABLES


def console_routes(
    settings: Settings, *, store: Store, verifier: TokenVerifier, issuer: DevIssuer | None
) -> list[BaseRoute]:
    if not settings.console.enabled:
        return []
    audit = trail_log(store, settings.audit)
    desk = SafetyDesk(store.tables(TABLES), settings, principals=store.principals, audit=audit)
    sign_outs = SignOuts(store.revocations, fallback_seconds=settings.console.cookie_seconds)
    host = Middleware(HostMiddleware, allowed_hosts=settings.allowed_hosts)
    challenge = (
        f'Bearer realm="{settings.server.name}", '
        f'resource_metadata="{settings.base_url}/.well-known/oauth-protected-resource"'
    )
    guard = [
        host,
        Middleware(
            ConsoleGuard,
            verifier=verifier,
            scope=settings.auth.operator_scope,
            challenge=challenge,
            sign_outs=sign_outs,
            cookie_verifier=_login_verifier(settings, issuer) if issuer is not None else None,
        ),
    ]
    page = ConsolePage(desk, service=settings.server.name)
    stream = LiveStream(
        desk,
        sign_outs=sign_outs,
        refresh_seconds=settings.console.refresh_seconds,
        ping_seconds=settings.streams.keepalive_seconds,
    )
    actions = Actions(desk, audit)
    routes: list[BaseRoute] = [
        Route("/console", page.render, methods=["GET"], middleware=guard),
        Route("/console/events", stream.events, methods=["GET"], middleware=guard),
        Route("/console/trail", TrailView(audit).records, methods=["GET"], middleware=guard),
        *(Route(f"/console/{name}", actions.endpoint(name), methods=["POST"], middleware=guard) for name in ACTIONS),
    ]
    if issuer is not None:
        login = DevLogin(
            issuer,
            state_dir=settings.store.path,
            scope=settings.auth.operator_scope,
            max_age=settings.console.cookie_seconds,
            secure=settings.base_url.startswith("https://"),
            audit=audit,
            service=settings.server.name,
            sign_outs=sign_outs,
        )
        routes += [
            Route(LOGIN_PATH, login.form, methods=["GET"], middleware=[host]),
            Route(LOGIN_PATH, login.login, methods=["POST"], middleware=[host]),
            Route("/console/logout", login.logout, methods=["POST"], middleware=guard),
        ]
    return routes


def _login_verifier(settings: Settings, issuer: DevIssuer) -> TokenVerifier:
    """The development login's tokens: the development issuer's key, the console's own audience."""
    return BearerVerifier(
        issuer=settings.issuer,
        audience=console_audience(settings.audience),
        static_keys={issuer.kid: SigningKey(issuer.kid, "ES256", issuer.public_key)},
        leeway=settings.auth.clock_skew_seconds,
    )
