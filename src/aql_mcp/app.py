"""`create_app(settings)`: the ASGI application, assembled top to bottom.

Global middleware, outermost first: request id -> tracing -> access log/metrics -> errors ->
body limit -> Origin/CORS (the request id is outermost so that even a 500 carries it).
The MCP endpoint adds route middleware: Host -> auth -> protocol version. Probes, the service
page and the discovery documents stay outside MCP auth.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

import structlog
from opentelemetry.sdk.trace.export import SpanExporter
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from aql_mcp import __version__
from aql_mcp.auth.dev_issuer import DevIssuer
from aql_mcp.auth.verifier import build_authentication
from aql_mcp.endpoint.eras import EraRouter
from aql_mcp.endpoint.legacy.sessions import SessionManager
from aql_mcp.endpoint.legacy.transport import StreamableHTTPEndpoint
from aql_mcp.endpoint.modern.endpoint import ModernEndpoint
from aql_mcp.endpoint.modern.listen import ListenEndpoint
from aql_mcp.endpoint.modern.listeners import Listeners
from aql_mcp.endpoint.modern.request_state import RequestStateSealer
from aql_mcp.endpoint.modern.task_methods import TaskMethods
from aql_mcp.endpoint.modern.tasks_extension import TaskRunner
from aql_mcp.endpoint.notifier import Notifier
from aql_mcp.landing import ServicePage
from aql_mcp.lifespan import Services, lifespan
from aql_mcp.middleware.access import AccessMiddleware
from aql_mcp.middleware.auth import AuthMiddleware
from aql_mcp.middleware.errors import ServerErrorMiddleware
from aql_mcp.middleware.host import HostMiddleware
from aql_mcp.middleware.limits import BodyLimitMiddleware
from aql_mcp.middleware.origin import OriginMiddleware
from aql_mcp.middleware.protocol_version import ProtocolVersionMiddleware
from aql_mcp.middleware.rate_limit import RateLimitMiddleware, ReplicaShare
from aql_mcp.middleware.refusal import StartupRefusalMiddleware
from aql_mcp.middleware.request_id import RequestIdMiddleware
from aql_mcp.middleware.tracing import TracingMiddleware
from aql_mcp.observability.metrics import Metrics, MetricsEndpoint
from aql_mcp.observability.probes import Probes
from aql_mcp.observability.telemetry import Telemetry
from aql_mcp.observability.tracing import Tracing
from aql_mcp.operations.endpoints import Surface
from aql_mcp.plugin_host.contracts import BackgroundPlugin
from aql_mcp.plugin_host.hooks import PluginHooks
from aql_mcp.plugin_host.loader import AnyPlugin, legacy_dispatcher, load_plugins
from aql_mcp.plugin_host.sources import plugin_sources
from aql_mcp.plugins.safety.console.routes import console_routes
from aql_mcp.protocol.lifecycle import HandshakeLimits
from aql_mcp.protocol.methods import build_dispatcher
from aql_mcp.protocol.policy import ScopeRules
from aql_mcp.protocol.primitives import Registry
from aql_mcp.settings import Settings
from aql_mcp.store.factory import open_store

log = structlog.get_logger("aql_mcp.plugins")
Endpoint = Callable[[Request], Awaitable[Response]]
# What a caller without a token may do when `auth.anonymous_listing` is on (corporate §7.1 MAY).
# `server/discover` is the modern era's counterpart of `initialize` (docs/eras.md).
ANONYMOUS_METHODS = frozenset(
    {"initialize", "notifications/initialized", "ping", "tools/list", "prompts/list", "server/discover"}
)


def create_app(
    settings: Settings, *, span_exporter: SpanExporter | None = None, plugins: Sequence[AnyPlugin] = ()
) -> Starlette:
    """The app; `span_exporter` lets tests collect spans in memory; `plugins` are plugin objects
    loaded after those the settings name (aql_mcp.testing.client)."""
    metrics = Metrics(service=settings.server.name, version=__version__)
    tracing = Tracing(
        service=settings.tracing.service_name or settings.server.name,
        version=__version__,
        otlp_endpoint=settings.tracing.otlp_endpoint,
        sample_ratio=settings.tracing.sample_ratio,
        exporter=span_exporter,
    )
    telemetry = Telemetry(metrics=metrics, tracing=tracing)
    registry = Registry()
    store = open_store(settings)
    share = ReplicaShare()
    sources = plugin_sources(settings)
    loaded = load_plugins(sources, registry, settings, store, telemetry, plugins)
    for plugin, source in zip(loaded, sources, strict=False):  # objects (tests) come last, unnamed
        log.info("plugin_loaded", plugin=plugin.name, source=source.origin, path=source.path)
    background = [plugin for plugin in loaded if isinstance(plugin, BackgroundPlugin)]
    hooks = PluginHooks(loaded)
    sessions = SessionManager(
        store,
        idle_seconds=settings.sessions.idle_seconds,
        max_open=settings.sessions.max_open,
        max_per_owner=settings.limits.max_sessions_per_principal,
        retry_after=settings.sessions.retry_after_seconds,
        on_limit=metrics.limit_event,
        on_end=hooks.session_end,
    )
    streams = settings.streams
    listeners = Listeners(
        max_open=streams.max_listens, max_per_owner=streams.max_listens_per_principal, on_limit=metrics.limit_event
    )
    # Changes reach both eras' clients, on every replica (docs/eras.md, "Subscriptions in the modern era").
    notifier = Notifier(sessions=sessions, listeners=listeners, bus=store.bus)
    tasks = TaskRunner(
        store.tasks,
        hub=notifier,
        ttl_seconds=settings.mcp.task_ttl_seconds,
        max_per_owner=settings.mcp.max_tasks_per_principal,
        max_result_bytes=settings.limits.max_result_bytes,
    )
    dispatcher = build_dispatcher(registry, settings, telemetry, tasks)
    legacy, task_capability = legacy_dispatcher(dispatcher, loaded)
    handshake_limits = HandshakeLimits(
        max_bytes=settings.sessions.max_client_info_bytes, max_depth=settings.sessions.max_client_info_depth
    )
    anonymous_methods = ANONYMOUS_METHODS if settings.auth.anonymous_listing else frozenset()
    endpoint = StreamableHTTPEndpoint(
        sessions=sessions,
        dispatcher=legacy,
        telemetry=telemetry,
        hub=notifier,
        server_name=settings.server.name,
        instructions=instructions(settings, registry),
        retry_ms=settings.streams.retry_ms,
        log_level=settings.logging.level,
        anonymous_methods=anonymous_methods,
        # A request runs at most the tool timeout; a follower waits that long and a little more.
        follow_seconds=settings.limits.tool_timeout_seconds + 5.0,
        handshake_limits=handshake_limits,
        task_capability=task_capability,
    )
    # The same dispatcher, handlers and plugins serve the modern era (docs/eras.md).
    listen = ListenEndpoint(
        listeners=listeners,
        registry=registry,
        rules=ScopeRules(resources=settings.auth.policy.resources),
        server_info={"name": settings.server.name, "title": settings.server.name, "version": __version__},
        keepalive_seconds=streams.keepalive_seconds,
        max_uris=streams.max_listen_resources,
    )
    modern = ModernEndpoint(
        # The Tasks extension's methods exist in the modern era only (endpoint/modern/tasks_extension.py).
        dispatcher=dispatcher.extended(TaskMethods(store.tasks, tasks).table()),
        hub=notifier,
        server_name=settings.server.name,
        instructions=instructions(settings, registry),
        telemetry=telemetry,
        sealer=RequestStateSealer.for_settings(settings, store),
        keepalive_seconds=settings.streams.keepalive_seconds,
        anonymous_methods=anonymous_methods,
        handshake_limits=handshake_limits,
        param_headers=registry.param_headers,
        listen=listen,
    )
    router = EraRouter(legacy=endpoint, modern=modern, modern_enabled=settings.mcp.modern_era)
    issuer = (
        DevIssuer(state_dir=settings.store.path, issuer=settings.issuer, audience=settings.audience)
        if settings.server.dev
        else None
    )
    authentication = build_authentication(
        settings,
        issuer,
        on_refresh=metrics.jwks_refresh,
        on_introspection=metrics.introspection_call,
        on_limit=metrics.limit_event,
    )
    metrics.track(
        sessions=sessions.live_count,
        streams=lambda: len(endpoint.connections) + len(listeners),
        replicas=lambda: share.replicas,
        session_cap=settings.sessions.max_open,
    )
    services = Services(
        settings,
        registry,
        sessions,
        endpoint,
        Probes(store, authentication.jwks, on_store_check=metrics.store_check),
        issuer,
        authentication,
        telemetry,
        share,
        listeners,
        notifier,
        tasks,
    )
    mcp_middleware = [
        Middleware(HostMiddleware, allowed_hosts=settings.allowed_hosts),
        Middleware(
            AuthMiddleware,
            verifier=authentication.verifier,
            realm=settings.server.name,
            resource_metadata=f"{settings.base_url}/.well-known/oauth-protected-resource",
            required_scopes=settings.auth.required_scopes,
            anonymous=settings.auth.anonymous_listing,
            on_failure=metrics.auth_failure,
        ),
        Middleware(
            RateLimitMiddleware,
            rate_per_second=settings.limits.rate_per_second,
            burst=settings.limits.rate_burst,
            max_concurrent=settings.limits.max_concurrent_calls,
            share=share,
            on_refusal=metrics.limit_event,
        ),
        Middleware(ProtocolVersionMiddleware, modern_enabled=settings.mcp.modern_era),
    ]
    routes = [
        Route("/mcp", router, middleware=mcp_middleware),
        Route("/health", services.probes.health, methods=["GET"]),
        Route("/ready", services.probes.ready, methods=["GET"]),
        Route(
            "/",
            ServicePage(name=settings.server.name, dev=settings.server.dev).render,
            methods=["GET"],
            middleware=[Middleware(HostMiddleware, allowed_hosts=settings.allowed_hosts)],
        ),
        Route("/.well-known/oauth-protected-resource", protected_resource(settings), methods=["GET"]),
        # The operator console (docs/console.md): its own guard, operator scope required.
        *console_routes(settings, store=store, verifier=authentication.verifier, issuer=issuer),
    ]
    if issuer is not None:
        routes.append(Route("/.well-known/jwks.json", jwks(issuer), methods=["GET"]))
    if settings.metrics.enabled and settings.metrics.port is None:
        routes.append(Route("/metrics", MetricsEndpoint(metrics, allowed=settings.metrics.allowed_clients)))
    app = Starlette(
        routes=routes,
        middleware=[
            Middleware(StartupRefusalMiddleware, refusal=services.refusal),
            Middleware(RequestIdMiddleware),
            Middleware(TracingMiddleware, tracing=tracing),
            Middleware(AccessMiddleware, metrics=metrics),
            Middleware(ServerErrorMiddleware),
            Middleware(
                BodyLimitMiddleware,
                max_bytes=settings.http.max_body_bytes,
                timeout_seconds=settings.http.body_timeout_seconds,
                on_refusal=metrics.limit_event,
            ),
            Middleware(OriginMiddleware, allowed_origins=settings.allowed_origins),
        ],
        lifespan=lifespan(services, store, background, hooks),
    )
    app.state.services = services
    return app


def create_metrics_app(settings: Settings, metrics: Metrics) -> Starlette:
    """`/metrics` alone, for `metrics.port`: the same series as the main app, the same allow-list."""
    endpoint = MetricsEndpoint(metrics, allowed=settings.metrics.allowed_clients)
    return Starlette(
        routes=[Route("/metrics", endpoint)],
        middleware=[Middleware(RequestIdMiddleware), Middleware(ServerErrorMiddleware)],
    )


def create_probes_app(probes: Probes) -> Starlette:
    """`/health` and `/ready` alone, for `probes.port`: the same answers as the main app's (one
    `Probes`, so a draining replica's `/ready` turns 503 on both ports)."""
    return Starlette(
        routes=[
            Route("/health", probes.health, methods=["GET"]),
            Route("/ready", probes.ready, methods=["GET"]),
        ],
        middleware=[Middleware(RequestIdMiddleware), Middleware(ServerErrorMiddleware)],
    )


def instructions(settings: Settings, registry: Registry) -> str:
    text = (
        f"{settings.server.name} serves tools, prompts and resources registered by its plugins. "
        "Call tools/list to see the tools; every tool states its side effects and risk level."
    )
    aql = settings.aql
    introspecting = Surface(aql.mode, aql.profile, aql.tool_prefix).introspect_tool
    if registry.tool(introspecting) is not None:
        text += (
            f" Its operations are served through MCP-AQL: call {introspecting} with "
            '{"operation": "introspect", "params": {"query": "operations"}} to list them.'
        )
    return text


def protected_resource(settings: Settings) -> Endpoint:
    document = {
        "resource": settings.audience,
        "authorization_servers": [settings.issuer],
        "bearer_methods_supported": ["header"],
        "resource_name": settings.server.name,
    }

    async def handler(request: Request) -> Response:
        return JSONResponse(document)

    return handler


def jwks(issuer: DevIssuer) -> Endpoint:
    document = issuer.jwks()

    async def handler(request: Request) -> Response:
        return JSONResponse(document, headers={"cache-control": "public, max-age=300"})

    return handler
