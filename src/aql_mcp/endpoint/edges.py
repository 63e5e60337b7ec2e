"""The two eras' MCP endpoints, built from what they share: the settings, the registry, the
telemetry and the notifier (docs/eras.md). `create_app` puts them behind one `EraRouter`."""

from __future__ import annotations

from dataclasses import dataclass

from aql_mcp import __version__
from aql_mcp.auth.principal import Principal
from aql_mcp.endpoint.legacy.sessions import SessionManager
from aql_mcp.endpoint.legacy.transport import StreamableHTTPEndpoint
from aql_mcp.endpoint.modern.endpoint import ModernEndpoint
from aql_mcp.endpoint.modern.listen import ListenEndpoint
from aql_mcp.endpoint.modern.listeners import Listeners
from aql_mcp.endpoint.modern.request_state import RequestStateSealer
from aql_mcp.endpoint.notifier import Notifier
from aql_mcp.jsonrpc.dispatcher import Dispatcher
from aql_mcp.observability.telemetry import Telemetry
from aql_mcp.operations.endpoints import Surface
from aql_mcp.protocol.context import Context
from aql_mcp.protocol.lifecycle import HandshakeLimits
from aql_mcp.protocol.param_headers import CallerHeaders, ParamHeader
from aql_mcp.protocol.policy import ScopeRules
from aql_mcp.protocol.primitives import Registry
from aql_mcp.protocol.task_mapping import ModernTaskMapper, TaskMapper
from aql_mcp.settings import Settings
from aql_mcp.store.base import Store

# What a caller without a token may do when `auth.anonymous_listing` is on (corporate §7.1 MAY).
# `server/discover` is the modern era's counterpart of `initialize` (docs/eras.md).
ANONYMOUS_METHODS = frozenset(
    {"initialize", "notifications/initialized", "ping", "tools/list", "prompts/list", "server/discover"}
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Edges:
    """Builds each era's endpoint over the same registry, telemetry and notifier."""

    settings: Settings
    registry: Registry
    telemetry: Telemetry
    notifier: Notifier

    def legacy(
        self, sessions: SessionManager, dispatcher: Dispatcher[Context], task_mapper: TaskMapper | None
    ) -> StreamableHTTPEndpoint:
        """The 2025-11-25 edge: sessions, SSE streams, and the `tasks` capability of the task mapper."""
        settings = self.settings
        return StreamableHTTPEndpoint(
            sessions=sessions,
            dispatcher=dispatcher,
            telemetry=self.telemetry,
            hub=self.notifier,
            server_name=settings.server.name,
            instructions=instructions(settings, self.registry),
            retry_ms=settings.streams.retry_ms,
            log_level=settings.logging.level,
            anonymous_methods=self.anonymous_methods,
            # A request runs at most the tool timeout; a follower waits that long and a little more.
            follow_seconds=settings.limits.tool_timeout_seconds + 5.0,
            handshake_limits=self.handshake_limits,
            task_capability=task_mapper.capability if task_mapper is not None else None,
        )

    def modern(
        self, dispatcher: Dispatcher[Context], store: Store, listeners: Listeners, mapper: ModernTaskMapper | None
    ) -> ModernEndpoint:
        """The 2026-07-28 edge: stateless requests, sealed request state, and `subscriptions/listen`
        (which reads the tasks of a plugin's `mapper` through it)."""
        settings, streams = self.settings, self.settings.streams
        listen = ListenEndpoint(
            listeners=listeners,
            registry=self.registry,
            rules=ScopeRules(resources=settings.auth.policy.resources),
            server_info={"name": settings.server.name, "title": settings.server.name, "version": __version__},
            max_uris=streams.max_listen_resources,
            tasks=store.tasks,
            mapper=mapper,
        )
        return ModernEndpoint(
            dispatcher=dispatcher,
            hub=self.notifier,
            server_name=settings.server.name,
            instructions=instructions(settings, self.registry),
            telemetry=self.telemetry,
            sealer=RequestStateSealer.for_settings(settings, store),
            keepalive_seconds=streams.keepalive_seconds,
            anonymous_methods=self.anonymous_methods,
            handshake_limits=self.handshake_limits,
            param_headers=caller_headers(self.registry, ScopeRules(tools=settings.auth.policy.tools)),
            listen=listen,
        )

    @property
    def anonymous_methods(self) -> frozenset[str]:
        return ANONYMOUS_METHODS if self.settings.auth.anonymous_listing else frozenset()

    @property
    def handshake_limits(self) -> HandshakeLimits:
        sessions = self.settings.sessions
        return HandshakeLimits(max_bytes=sessions.max_client_info_bytes, max_depth=sessions.max_client_info_depth)


def caller_headers(registry: Registry, rules: ScopeRules) -> CallerHeaders:
    """The `Mcp-Param-*` headers a modern `tools/call` is checked for: those of the tool, if the
    caller holds its scopes (`auth.policy.tools`); none otherwise, so the scope refusal comes
    first (docs/eras.md, "Custom parameter headers")."""

    def headers(name: str, principal: Principal | None) -> tuple[ParamHeader, ...]:
        return () if rules.missing_for_tool(name, principal) else registry.param_headers(name)

    return headers


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
