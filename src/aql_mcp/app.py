"""`create_app(settings)`: the ASGI application, assembled top to bottom by named builders.

Global middleware, outermost first: drain -> request id -> tracing -> access log/metrics -> errors ->
body limit -> Origin/CORS (the request id is outermost but for the drain's `Connection: close`, so
that even a 500 carries it).
The MCP endpoint adds its own (mcp_guards.py): Host -> auth -> rate limit -> protocol version; `/mcp`
goes from the global middleware straight to them (middleware/shortcut.py), not through Starlette's
router, so a held stream keeps fewer frames. Probes,
the service page and the discovery documents (OAuth metadata, the Server Card and the catalogs)
stay outside MCP auth; plugins' routes (the safety plugin's operator console) come last and bring
their own guards (docs/plugins.md).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

import structlog
from opentelemetry.sdk.trace.export import SpanExporter
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp

from aql_mcp import __version__, discovery
from aql_mcp.audit.writer import dropped_records_counter
from aql_mcp.auth.dev_issuer import DevIssuer
from aql_mcp.auth.verifier import Authentication, build_authentication
from aql_mcp.endpoint.edges import Edges
from aql_mcp.endpoint.eras import EraRouter
from aql_mcp.endpoint.legacy.sessions import SessionManager
from aql_mcp.endpoint.modern.listeners import Listeners
from aql_mcp.endpoint.modern.task_methods import TaskMethods
from aql_mcp.endpoint.modern.tasks_extension import StatusChange, TaskRunner
from aql_mcp.endpoint.notifier import Notifier
from aql_mcp.landing import ServicePage
from aql_mcp.lifespan import Services, lifespan
from aql_mcp.mcp_guards import mcp_endpoint, rate_limit
from aql_mcp.middleware.access import AccessMiddleware
from aql_mcp.middleware.drain import DrainMiddleware
from aql_mcp.middleware.errors import ServerErrorMiddleware
from aql_mcp.middleware.host import HostMiddleware
from aql_mcp.middleware.limits import BodyLimitMiddleware
from aql_mcp.middleware.origin import OriginMiddleware
from aql_mcp.middleware.rate_limit import ReplicaShare
from aql_mcp.middleware.refusal import StartupRefusalMiddleware
from aql_mcp.middleware.request_id import RequestIdMiddleware
from aql_mcp.middleware.shortcut import McpShortcut
from aql_mcp.middleware.tracing import TracingMiddleware
from aql_mcp.observability.mcp_metrics import McpMetrics
from aql_mcp.observability.metrics import Metrics, MetricsEndpoint
from aql_mcp.observability.probes import Probes
from aql_mcp.observability.task_metrics import TaskMeter
from aql_mcp.observability.telemetry import Telemetry
from aql_mcp.observability.tracing import Tracing
from aql_mcp.operations.audit import trail_log
from aql_mcp.plugin_host.contracts import BackgroundPlugin, RouteServices, RoutesPlugin
from aql_mcp.plugin_host.hooks import PluginHooks
from aql_mcp.plugin_host.loader import AnyPlugin, load_plugins
from aql_mcp.plugin_host.sources import plugin_sources
from aql_mcp.plugin_host.task_mappers import modern_task_mapper, task_mapper
from aql_mcp.protocol.methods import build_dispatcher, legacy_table
from aql_mcp.protocol.primitives import Registry
from aql_mcp.protocol.task_mapping import TaskStatusReporter
from aql_mcp.settings import Settings
from aql_mcp.store.base import Store
from aql_mcp.store.factory import open_store

log = structlog.get_logger("aql_mcp.plugins")
Endpoint = Callable[[Request], Awaitable[Response]]


def create_app(
    settings: Settings, *, span_exporter: SpanExporter | None = None, plugins: Sequence[AnyPlugin] = ()
) -> Starlette:
    """The app; `span_exporter` lets tests collect spans in memory; `plugins` are plugin objects
    loaded after those the settings name (aql_mcp.testing.client)."""
    telemetry = build_telemetry(settings, span_exporter)
    registry, store = Registry(), open_store(settings)
    reporter = TaskStatusReporter()
    loaded = loaded_plugins(settings, registry, store, telemetry, plugins, reporter)
    hooks = PluginHooks(loaded)
    services, router = assemble(settings, telemetry, registry, store, loaded, hooks)
    # The plugins' mapped tasks reach the listen streams as the core's own do (docs/eras.md, "Tasks").
    reporter.bind(services.notifier.task_changed)
    verifier = services.authentication.verifier
    extra = plugin_routes(
        settings, loaded, RouteServices(store=store, verifier=verifier, dev_issuer=services.dev_issuer)
    )
    background = [plugin for plugin in loaded if isinstance(plugin, BackgroundPlugin)]
    mcp = mcp_endpoint(services, router)
    app = Starlette(
        routes=service_routes(services, mcp, extra),
        middleware=[*global_middleware(services), Middleware(McpShortcut, path="/mcp", endpoint=mcp)],
        lifespan=lifespan(services, store, background, hooks),
    )
    app.state.services = services
    return app


def build_telemetry(settings: Settings, span_exporter: SpanExporter | None) -> Telemetry:
    """Metrics and tracing of this app (docs/monitoring.md)."""
    metrics = Metrics(service=settings.server.name, version=__version__)
    service = settings.tracing.service_name or settings.server.name
    tracing = Tracing(
        service=service,
        version=__version__,
        otlp_endpoint=settings.tracing.otlp_endpoint,
        sample_ratio=settings.tracing.sample_ratio,
        exporter=span_exporter,
    )
    mcp_metrics = McpMetrics(
        metrics.registry, service=service, version=__version__, otlp_endpoint=settings.tracing.otlp_metrics_endpoint
    )
    return Telemetry(metrics=metrics, tracing=tracing, mcp_metrics=mcp_metrics)


def loaded_plugins(
    settings: Settings,
    registry: Registry,
    store: Store,
    telemetry: Telemetry,
    objects: Sequence[AnyPlugin],
    task_status: TaskStatusReporter,
) -> list[AnyPlugin]:
    """The plugins the settings name, then `objects`, each registered (plugin_host/loader.py)."""
    sources = plugin_sources(settings)
    loaded = load_plugins(sources, registry, settings, store, telemetry, objects, task_status)
    for plugin, source in zip(loaded, sources, strict=False):  # objects (tests) come last, unnamed
        log.info("plugin_loaded", plugin=plugin.name, source=source.origin, path=source.path)
    return loaded


def assemble(
    settings: Settings,
    telemetry: Telemetry,
    registry: Registry,
    store: Store,
    loaded: Sequence[AnyPlugin],
    hooks: PluginHooks,
) -> tuple[Services, EraRouter]:
    """What the app is made of, and `/mcp`: both eras' edges over one dispatcher (docs/eras.md)."""
    metrics, share = telemetry.metrics, ReplicaShare()
    sessions = session_manager(settings, store, telemetry, hooks)
    streams = settings.streams
    listeners = Listeners(
        max_open=streams.max_listens, max_per_owner=streams.max_listens_per_principal, on_limit=metrics.limit_event
    )
    # Changes reach both eras' clients, on every replica (docs/eras.md, "Subscriptions in the modern era").
    notifier = Notifier(sessions=sessions, listeners=listeners, bus=store.bus)
    tasks = task_runner(settings, store, notifier, metrics.tasks)
    mapper, modern_mapper = task_mapper(loaded), modern_task_mapper(loaded)
    dispatcher = build_dispatcher(registry, settings, telemetry, tasks, mapper, modern_mapper)
    edges = Edges(settings=settings, registry=registry, telemetry=telemetry, notifier=notifier)
    endpoint = edges.legacy(sessions, legacy_table(dispatcher, mapper), mapper)
    # The Tasks extension's methods exist in the modern era only (endpoint/modern/tasks_extension.py).
    task_methods = TaskMethods(store.tasks, tasks, mapper=modern_mapper)
    modern = edges.modern(dispatcher.extended(task_methods.table()), store, listeners, modern_mapper)
    issuer = dev_issuer(settings)
    authentication = authentication_of(settings, issuer, metrics)
    metrics.track(
        sessions=sessions.live_count,
        streams=lambda: len(endpoint.connections) + len(listeners),
        replicas=lambda: share.replicas,
        session_cap=settings.sessions.max_open,
    )
    services = Services(
        settings=settings,
        registry=registry,
        sessions=sessions,
        endpoint=endpoint,
        probes=Probes(
            store, authentication.key_sources, on_store_check=metrics.store_check, audit_trail=settings.audit.trail
        ),
        dev_issuer=issuer,
        authentication=authentication,
        telemetry=telemetry,
        share=share,
        listeners=listeners,
        notifier=notifier,
        tasks=tasks,
        plugins=tuple(loaded),
        audit=trail_log(store, settings.audit, on_drop=dropped_records_counter(metrics.registry)),
    )
    return services, EraRouter(legacy=endpoint, modern=modern, modern_enabled=settings.mcp.modern_era)


def session_manager(settings: Settings, store: Store, telemetry: Telemetry, hooks: PluginHooks) -> SessionManager:
    mcp_metrics = telemetry.mcp_metrics
    return SessionManager(
        store,
        idle_seconds=settings.sessions.idle_seconds,
        max_open=settings.sessions.max_open,
        max_per_owner=settings.limits.max_sessions_per_principal,
        retry_after=settings.sessions.retry_after_seconds,
        on_limit=telemetry.metrics.limit_event,
        on_end=hooks.session_end,
        on_duration=lambda record, seconds: mcp_metrics.session(
            seconds=seconds, protocol_version=record.protocol_version
        ),
    )


def task_runner(settings: Settings, store: Store, notifier: Notifier, meter: TaskMeter) -> TaskRunner:
    """The Tasks extension's runner: its status changes notified (endpoint/notifier.py) and its
    tasks counted on /metrics (`task_kind="task"`)."""

    async def on_status(change: StatusChange) -> None:
        meter.finished("task", change.status)  # counts the ends only
        await notifier.task_status(change)

    runner = TaskRunner(
        store.tasks,
        hub=notifier,
        ttl_seconds=settings.mcp.task_ttl_seconds,
        max_per_owner=settings.mcp.max_tasks_per_principal,
        max_result_bytes=settings.limits.max_result_bytes,
        lease_seconds=settings.store.lease_seconds,
        on_status=on_status,
    )
    meter.track("task", lambda: runner.running)

    # A lost replica's task failed here: its end is counted by `on_status` (told here too).
    runner.on_takeover(lambda _task_id: meter.takeover("task", "ended"))
    return runner


def dev_issuer(settings: Settings) -> DevIssuer | None:
    if not settings.server.dev:
        return None
    return DevIssuer(state_dir=settings.store.path, issuer=settings.issuer, audience=settings.audience)


def authentication_of(settings: Settings, issuer: DevIssuer | None, metrics: Metrics) -> Authentication:
    return build_authentication(
        settings,
        issuer,
        on_refresh=metrics.jwks_refresh,
        on_introspection=metrics.introspection_call,
        on_limit=metrics.limit_event,
    )


def service_routes(services: Services, mcp: ASGIApp, extra: Sequence[BaseRoute]) -> list[BaseRoute]:
    """`/mcp`, the probes, the service page and discovery documents, then the plugins' routes (`extra`),
    then the development JWKS and `/metrics` when they are served here."""
    settings = services.settings
    routes: list[BaseRoute] = [
        Route("/mcp", mcp),
        Route("/health", services.probes.health, methods=["GET"]),
        Route("/ready", services.probes.ready, methods=["GET"]),
        Route(
            "/",
            ServicePage(
                name=settings.server.name, dev=settings.server.dev, discovery=discovery.enabled(settings)
            ).render,
            methods=["GET"],
            middleware=[Middleware(HostMiddleware, allowed_hosts=settings.allowed_hosts)],
        ),
        Route("/.well-known/oauth-protected-resource", protected_resource(settings), methods=["GET"]),
        *discovery_routes(services),
        *extra,
    ]
    if services.dev_issuer is not None:
        routes.append(Route("/.well-known/jwks.json", jwks(services.dev_issuer), methods=["GET"]))
    if settings.metrics.enabled and settings.metrics.port is None:
        metrics = services.telemetry.metrics
        routes.append(Route("/metrics", MetricsEndpoint(metrics, allowed=settings.metrics.allowed_clients)))
    return routes


def discovery_routes(services: Services) -> list[BaseRoute]:
    """The Server Card and the catalogs (discovery.py), when `discovery.server_card` serves them:
    anonymous, so outside `/mcp`'s authentication, behind the Host check and a rate limit of their
    own (every caller shares the anonymous budget; SEP-2127, "Denial of Service")."""
    settings = services.settings
    guards = [
        Middleware(HostMiddleware, allowed_hosts=settings.allowed_hosts),
        rate_limit(services),
    ]
    documents = discovery.documents(settings)
    return [Route(path, document.respond, methods=["GET"], middleware=guards) for path, document in documents.items()]


def plugin_routes(settings: Settings, plugins: Sequence[AnyPlugin], services: RouteServices) -> list[BaseRoute]:
    """The HTTP routes plugins serve (plugin_host/contracts.py `RoutesPlugin`), in load order."""
    return [
        route for plugin in plugins if isinstance(plugin, RoutesPlugin) for route in plugin.routes(settings, services)
    ]


def global_middleware(services: Services) -> list[Middleware]:
    """Around every route, outermost first (the module docstring says why in this order)."""
    settings, telemetry = services.settings, services.telemetry
    probes = services.probes
    return [
        Middleware(DrainMiddleware, draining=lambda: probes.draining),
        Middleware(StartupRefusalMiddleware, refusal=services.refusal),
        Middleware(RequestIdMiddleware),
        Middleware(TracingMiddleware, tracing=telemetry.tracing),
        Middleware(AccessMiddleware, metrics=telemetry.metrics),
        Middleware(ServerErrorMiddleware),
        Middleware(
            BodyLimitMiddleware,
            max_bytes=settings.http.max_body_bytes,
            timeout_seconds=settings.http.body_timeout_seconds,
            on_refusal=telemetry.metrics.limit_event,
        ),
        Middleware(OriginMiddleware, allowed_origins=settings.allowed_origins),
    ]


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


def protected_resource(settings: Settings) -> Endpoint:
    document = {
        "resource": settings.audience,
        # Every trusted issuer (RFC 9728 §2): the single-issuer settings' first, then `auth.issuers`.
        "authorization_servers": [settings.issuer, *(entry.issuer for entry in settings.auth.issuers)],
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
