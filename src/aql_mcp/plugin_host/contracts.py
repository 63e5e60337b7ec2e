"""The plugin contracts: tools, prompts and resources through `register(registry)`; MCP-AQL
operations through `register_operations(operations)`. A plugin implements one or both, and may
offer more: work of its own while the service runs, settings of its own, HTTP routes and banner
text (the safety plugin's operator console), tasks of either era (the executions plugin), and hear of the
core's events: sessions that ended (`on_session_end`) and periodic clean-up (`housekeeping`). The
app looks for each with `isinstance` on the loaded plugins (docs/plugins.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from pydantic import BaseModel

from aql_mcp.protocol.primitives import Registry

if TYPE_CHECKING:
    from starlette.routing import BaseRoute

    from aql_mcp.auth.dev_issuer import DevIssuer
    from aql_mcp.auth.tokens import TokenVerifier
    from aql_mcp.operations.models import TrustLevel
    from aql_mcp.operations.service import PluginOperations
    from aql_mcp.protocol.task_mapping import ModernTaskMapper, TaskMapper
    from aql_mcp.settings import Settings
    from aql_mcp.store.base import Store


@runtime_checkable
class Plugin(Protocol):
    """Adds tools, prompts and resources to the registry by explicit calls at startup."""

    name: str

    def register(self, registry: Registry) -> None: ...


@runtime_checkable
class OperationsPlugin(Protocol):
    """Adds MCP-AQL operations by explicit calls at startup; `trust` gates them by danger level
    (MCP-AQL danger levels §4.1; built-ins are `community_reviewed`)."""

    name: str
    trust: TrustLevel

    def register_operations(self, operations: PluginOperations) -> None: ...


@runtime_checkable
class BackgroundPlugin(Protocol):
    """Runs work of its own while the service runs: `start` once the store is open, `stop` before
    it closes (the service's lifespan calls both)."""

    async def start(self) -> None: ...
    async def stop(self) -> None: ...


@runtime_checkable
class SessionEndPlugin(Protocol):
    """Hears that sessions ended: deleted by their client, or expired (idle past `sessions.idle_seconds`).

    Called once per ended session, on the replica that ended it, after the store deleted the session
    and before the other replicas hear of it; `now` is the time the core ended it at (docs/plugins.md,
    "Hooks"). What the plugin keeps per session (the executions plugin: runs it cancels) ends here.
    """

    async def on_session_end(self, session_ids: Sequence[str], now: float) -> None: ...


@runtime_checkable
class HousekeepingPlugin(Protocol):
    """Runs the plugin's periodic clean-up (purging what outlived its retention) with the core's own,
    every 30 s on every replica; a failure is logged and tried again next time (docs/plugins.md, "Hooks")."""

    async def housekeeping(self, now: float) -> None: ...


@runtime_checkable
class TaskMapperPlugin(Protocol):
    """Runs task-augmented 2025-11-25 `tools/call`s as tasks of its own (the executions plugin maps
    them onto executions): the core's `tools/list` and `tools/call` consult the mapper it returns,
    called once its operations are registered; None: no mapper (protocol/task_mapping.py)."""

    def task_mapper(self) -> TaskMapper | None: ...


@runtime_checkable
class ModernTaskMapperPlugin(Protocol):
    """Answers 2026-07-28 calls with tasks of its own (Tasks extension, SEP-2663; the executions
    plugin: executions and agent runs): the core's `tools/call` and `tasks/*` consult the mapper it
    returns, called once its operations are registered; None: no mapper (protocol/task_mapping.py)."""

    def modern_task_mapper(self) -> ModernTaskMapper | None: ...


@runtime_checkable
class ConfigurablePlugin(Protocol):
    """Takes settings of its own: the `plugins.<name>` section, validated by `settings_model` (a
    pydantic model class) and handed to `configure` before the plugin registers anything
    (plugin_host/sections.py, docs/plugins.md "Plugin settings")."""

    name: str
    settings_model: type[BaseModel]

    def configure(self, settings: Any) -> None: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class RouteServices:
    """What the app hands `RoutesPlugin.routes`: the store, the verifier of the service's bearer
    tokens, and the development issuer (development mode only, else None)."""

    store: Store
    verifier: TokenVerifier
    dev_issuer: DevIssuer | None


@runtime_checkable
class RoutesPlugin(Protocol):
    """Serves HTTP routes of its own beside `/mcp` (the safety plugin's operator console). The app
    mounts them once, after its own routes and behind the same global middleware (request id,
    tracing, access log, errors, body limit, Origin); each route brings its own guard (Host
    allow-list, authentication) as route middleware, as `/mcp` does."""

    name: str

    def routes(self, settings: Settings, services: RouteServices) -> list[BaseRoute]: ...


@runtime_checkable
class BannerPlugin(Protocol):
    """Adds lines to the banner `aql-mcp serve --dev` prints on stderr (development mode only).
    `terminal` says whether stderr is a terminal: a secret may be shown only then."""

    name: str

    def banner(self, settings: Settings, *, terminal: bool) -> str: ...
