"""Load plugins from `module:attribute` import strings, once, at startup."""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Sequence
from typing import Any

import structlog

from aql_mcp.exceptions import ConfigError
from aql_mcp.jsonrpc.dispatcher import Dispatcher
from aql_mcp.operations.models import TRUST_LEVELS, TrustLevel
from aql_mcp.operations.service import AqlService
from aql_mcp.operations.trust import effective_trust
from aql_mcp.plugins.base import LegacyMethodsPlugin, OperationsPlugin, Plugin
from aql_mcp.protocol.context import Context
from aql_mcp.registry import Registry
from aql_mcp.settings import Settings
from aql_mcp.store.base import Store
from aql_mcp.telemetry import Telemetry

AnyPlugin = Plugin | OperationsPlugin
log = structlog.get_logger("aql_mcp.plugins")


def import_plugin(path: str, settings: Settings | None = None) -> AnyPlugin:
    """Import `package.module:attribute`: a plugin, or a factory called with the settings that returns one."""
    module_name, sep, attribute = path.partition(":")
    if not sep or not module_name or not attribute:
        raise ConfigError(f"plugin {path!r}: expected an import string 'package.module:attribute'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"plugin {path!r}: cannot import {module_name} ({exc})") from None
    candidate = getattr(module, attribute, None)
    if candidate is None:
        raise ConfigError(f"plugin {path!r}: {module_name} has no attribute {attribute!r}")
    if not isinstance(candidate, (Plugin, OperationsPlugin)) and callable(candidate):
        try:
            candidate = candidate(settings)
        except Exception as exc:
            raise ConfigError(
                f"plugin {path!r}: calling {attribute} did not make a plugin ({type(exc).__name__})"
            ) from exc
    if not isinstance(candidate, (Plugin, OperationsPlugin)):
        raise ConfigError(
            f"plugin {path!r}: not a plugin (needs a `name` and `register(registry)` "
            "or `trust` and `register_operations(operations)`)"
        )
    return candidate


def load_plugins(
    paths: Iterable[str],
    registry: Registry,
    settings: Settings | None = None,
    store: Store | None = None,
    telemetry: Telemetry | None = None,
    objects: Sequence[AnyPlugin] = (),
) -> list[AnyPlugin]:
    """Import every plugin and let it register; a duplicate name fails naming both plugins.
    `objects` are plugins already built, registered after the imported ones (the test client).

    The MCP-AQL service (router, `introspect`, endpoint tools) is set up when the first plugin with
    operations loads; without such a plugin the service exposes no MCP-AQL tools.
    """
    settings = settings or Settings()
    plugins = [import_plugin(path, settings) for path in paths]
    for candidate in objects:
        if not isinstance(candidate, (Plugin, OperationsPlugin)):
            raise ConfigError(f"plugin {candidate!r}: not a plugin (see aql_mcp.plugin.Plugin and OperationsPlugin)")
        plugins.append(candidate)
    service: AqlService | None = None
    for plugin in plugins:
        registry.plugin = plugin.name
        if isinstance(plugin, Plugin):
            plugin.register(registry)
        if isinstance(plugin, OperationsPlugin):
            if plugin.trust not in TRUST_LEVELS:
                raise ConfigError(
                    f"plugin {plugin.name}: trust {plugin.trust!r} is not one of {', '.join(TRUST_LEVELS)}"
                )
            if service is None:
                if store is None:
                    raise ConfigError(f"plugin {plugin.name}: MCP-AQL operations need the service store")
                service = AqlService(registry, settings, store, telemetry)
            trust = _trust(plugin, settings)
            plugin.register_operations(service.for_plugin(plugin.name, trust, plugin.trust))
    registry.plugin = "runtime"
    _check_overrides(plugins, settings)
    return plugins


def _trust(plugin: OperationsPlugin, settings: Settings) -> TrustLevel:
    aql = settings.aql
    trust = effective_trust(plugin.name, plugin.trust, ceiling=aql.max_trust, overrides=aql.plugin_trust)
    if trust != plugin.trust:
        # The operator must see that a plugin asked for more (or was given other) trust than it runs with.
        source = "aql.plugin_trust" if plugin.name in aql.plugin_trust else "aql.max_trust"
        log.warning("plugin_trust_changed", plugin=plugin.name, declared=plugin.trust, effective=trust, setting=source)
    return trust


def _check_overrides(plugins: list[AnyPlugin], settings: Settings) -> None:
    """A trust override for a plugin that is not loaded is a typo that would silently change nothing."""
    loaded = {plugin.name for plugin in plugins if isinstance(plugin, OperationsPlugin)}
    unknown = sorted(set(settings.aql.plugin_trust) - loaded)
    if unknown:
        raise ConfigError(
            f"aql.plugin_trust (AQL_MCP_AQL__PLUGIN_TRUST): no loaded plugin with operations is named "
            f"{', '.join(unknown)}; loaded: {', '.join(sorted(loaded)) or 'none'}"
        )


def legacy_dispatcher(
    dispatcher: Dispatcher[Context], plugins: Sequence[object]
) -> tuple[Dispatcher[Context], dict[str, Any] | None]:
    """The 2025-11-25 dispatcher with the methods plugins add or wrap there (MCP tasks over
    executions, docs/executions.md), and the `tasks` capability they declare."""
    capability: dict[str, Any] | None = None
    for plugin in plugins:
        if isinstance(plugin, LegacyMethodsPlugin):
            call, listing = dispatcher.handler("tools/call"), dispatcher.handler("tools/list")
            methods = plugin.legacy_methods(call, listing) if call and listing else {}
            if methods:
                dispatcher = dispatcher.extended(methods)
                capability = plugin.task_capability
    return dispatcher, capability
