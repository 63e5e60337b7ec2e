"""The plugin contracts: tools, prompts and resources through `register(registry)`; MCP-AQL
operations through `register_operations(operations)`. A plugin implements one or both, and may
subscribe to the core's hooks (`on_session_end`, `housekeeping`) by having the method."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from pydantic import BaseModel

from aql_mcp.protocol.primitives import Registry

if TYPE_CHECKING:
    from aql_mcp.operations.models import TrustLevel
    from aql_mcp.operations.service import PluginOperations
    from aql_mcp.protocol.context import Context

LegacyHandler = Callable[[dict[str, Any], "Context"], Awaitable[dict[str, Any]]]


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
class LegacyMethodsPlugin(Protocol):
    """Adds or wraps methods of the 2025-11-25 era (MCP tasks over executions), and declares
    `task_capability` to clients that declare `tasks`. The handlers it wraps are given to it."""

    @property
    def task_capability(self) -> dict[str, Any]: ...
    def legacy_methods(self, tools_call: LegacyHandler, tools_list: LegacyHandler) -> dict[str, LegacyHandler]: ...


@runtime_checkable
class ConfigurablePlugin(Protocol):
    """Takes settings of its own: the `plugins.<name>` section, validated by `settings_model` (a
    pydantic model class) and handed to `configure` before the plugin registers anything
    (plugin_host/sections.py, docs/plugins.md "Plugin settings")."""

    name: str
    settings_model: type[BaseModel]

    def configure(self, settings: Any) -> None: ...
