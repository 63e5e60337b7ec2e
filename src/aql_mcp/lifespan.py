"""What the service does while it runs: open the store, start the background loops and plugins,
and stop them all in order when the server shuts down. `Services` is what the app is made of
(app.py assembles it); the loops here read it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field

import anyio
import structlog
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from starlette.applications import Starlette

from aql_mcp.auth.dev_issuer import DevIssuer
from aql_mcp.auth.jwks import JwksKeySource
from aql_mcp.auth.verifier import Authentication
from aql_mcp.endpoint.legacy.sessions import SessionManager
from aql_mcp.endpoint.legacy.transport import StreamableHTTPEndpoint
from aql_mcp.endpoint.modern.listeners import Listeners
from aql_mcp.endpoint.modern.tasks_extension import TaskRunner
from aql_mcp.endpoint.notifier import Notifier
from aql_mcp.middleware.rate_limit import ReplicaShare
from aql_mcp.middleware.refusal import Refusal
from aql_mcp.observability.probes import Probes
from aql_mcp.observability.telemetry import Telemetry
from aql_mcp.operations.audit import AuditLog
from aql_mcp.plugin_host.contracts import BackgroundPlugin, OperationsPlugin, Plugin
from aql_mcp.plugin_host.hooks import PluginHooks
from aql_mcp.protocol.primitives import Kind, Registry
from aql_mcp.settings import Settings
from aql_mcp.store.base import Store
from aql_mcp.store.migration import SchemaTooNew

log = structlog.get_logger("aql_mcp.app")
HOUSEKEEPING_SECONDS = 30.0
# How often a replica says it is alive; the store counts one as gone after three missed beats.
HEARTBEAT_SECONDS = 5.0
LIST_CHANGED = {"tool": "notifications/tools/list_changed", "prompt": "notifications/prompts/list_changed"}


@dataclass(frozen=True, slots=True, kw_only=True)
class Services:
    """What the app is made of, reachable from tests and the CLI as `app.state.services`."""

    settings: Settings
    registry: Registry
    sessions: SessionManager
    endpoint: StreamableHTTPEndpoint
    probes: Probes
    dev_issuer: DevIssuer | None
    authentication: Authentication
    telemetry: Telemetry
    share: ReplicaShare
    listeners: Listeners
    notifier: Notifier
    tasks: TaskRunner
    # The loaded plugins, in load order: the CLI asks them for banner lines (plugin_host/contracts.py).
    plugins: tuple[Plugin | OperationsPlugin, ...] = ()
    # Set when the start was refused for its configuration (a store a newer release migrated).
    refusal: Refusal = field(default_factory=Refusal)
    # The guards' trail: authentication failures and rate-limit refusals, droppable (docs/audit.md).
    audit: AuditLog = field(default_factory=AuditLog)


def lifespan(
    services: Services, store: Store, background: Sequence[BackgroundPlugin] = (), hooks: PluginHooks | None = None
) -> Callable[[Starlette], AbstractAsyncContextManager[None]]:
    hooks = hooks or PluginHooks()

    @asynccontextmanager
    async def run(app: Starlette) -> AsyncIterator[None]:
        store.bus.listen(services.notifier.on_signal)
        try:
            await store.open()
        except SchemaTooNew as exc:
            log.error("schema_too_new", found=exc.found, needs=exc.needs, known=exc.known)
            raise
        services.telemetry.metrics.store_check(available=True)  # opened: it answered, migrations ran
        services.share.replicas = await store.bus.heartbeat(time.time())
        services.telemetry.metrics.store_sessions(await store.count_sessions())
        changes_in, changes_out = anyio.create_memory_object_stream[Kind](100)
        services.registry.on_change(lambda kind: _offer(changes_in, kind))
        key_sources = services.authentication.key_sources
        for jwks in key_sources:
            await jwks.refresh()  # not ready until one succeeds; the refresher keeps trying
        for plugin in background:
            await plugin.start()
        services.tasks.start()  # renews the leases of the tasks run here, fails those of lost replicas
        async with anyio.create_task_group() as group:
            for jwks in key_sources:
                group.start_soon(_refresh_keys, jwks)
            group.start_soon(_housekeeping, services, hooks)
            group.start_soon(_heartbeat, services, store)
            group.start_soon(_keepalive, services)
            group.start_soon(_announce_changes, services, changes_out)
            _log_start(services.settings)
            try:
                yield
            finally:
                group.cancel_scope.cancel()
        # Background work first: what it stops is failed with a reason before the calls following it end.
        for plugin in background:
            await plugin.stop()
        await services.sessions.close_all()
        await services.tasks.close()
        await services.authentication.client.aclose()
        services.telemetry.tracing.shutdown()
        services.telemetry.mcp_metrics.shutdown()
        await store.close()

    return run


def _offer(stream: MemoryObjectSendStream[Kind], kind: Kind) -> None:
    # A burst of changes fills the queue: the notifications already queued say the same.
    with contextlib.suppress(anyio.WouldBlock):
        stream.send_nowait(kind)


async def _announce_changes(services: Services, changes: MemoryObjectReceiveStream[Kind]) -> None:
    async for kind in changes:
        method = LIST_CHANGED.get(kind, "notifications/resources/list_changed")
        await services.notifier.list_changed(method)


async def _housekeeping(services: Services, hooks: PluginHooks) -> None:
    retention = services.settings.streams.event_retention_seconds
    while True:
        await anyio.sleep(HOUSEKEEPING_SECONDS)
        try:
            await services.sessions.sweep()
            services.telemetry.metrics.store_sessions(await services.sessions.store.count_sessions())
            await services.sessions.store.purge_events(time.time() - retention)
            await _forget_spent(services)
        except Exception:
            log.exception("housekeeping_failed")
        await hooks.housekeeping(time.time())


async def _forget_spent(services: Services) -> None:
    """Confirmation grants past their TTL (kept one more TTL so a late retry hears why) and
    signed-out tokens past their expiry; the plugins purge their own (`housekeeping`)."""
    store, settings, now = services.sessions.store, services.settings, time.time()
    await store.confirmations.purge_grants(now - settings.aql.confirmation_ttl_seconds)
    await store.revocations.purge_revocations(now)


async def _heartbeat(services: Services, store: Store) -> None:
    """Tell the other replicas this one is alive, and take this replica's share of the rate budget."""
    while True:
        await anyio.sleep(HEARTBEAT_SECONDS)
        try:
            services.share.replicas = await store.bus.heartbeat(time.time())
        except Exception:
            log.warning("heartbeat_failed")


def _log_start(settings: Settings) -> None:
    """The start line; a trail that is off says so loudly, since nothing else would (docs/audit.md)."""
    log.info("service_started", name=settings.server.name, dev=settings.server.dev, audit_trail=settings.audit.trail)
    if not settings.audit.trail:
        log.warning("audit_trail_off", setting="audit.trail", detail="no audit record is written")


async def _refresh_keys(jwks: JwksKeySource) -> None:
    """Refresh the key set before its TTL runs out; retry sooner while it is failing."""
    while True:
        await anyio.sleep(min(jwks.ttl / 2, 30.0) if jwks.status() != "ok" else jwks.ttl * 0.8)
        await jwks.refresh()


async def _keepalive(services: Services) -> None:
    idle = services.settings.streams.keepalive_seconds
    while True:
        await anyio.sleep(idle / 2)
        await services.endpoint.keepalive(idle)
        services.listeners.keepalive(idle)
