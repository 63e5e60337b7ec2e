"""Load plugins from `module:attribute` import strings, once, at startup."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Sequence
from functools import partial

import structlog

from aql_mcp.exceptions import ConfigError
from aql_mcp.observability.telemetry import Telemetry
from aql_mcp.operations.models import TRUST_LEVELS, TrustLevel
from aql_mcp.operations.service import AqlService
from aql_mcp.operations.trust import effective_trust
from aql_mcp.plugin_host.contracts import OperationsPlugin, Plugin
from aql_mcp.plugin_host.sections import configure_plugin, refuse_unknown_sections
from aql_mcp.plugin_host.sources import PluginSource
from aql_mcp.protocol.primitives import Registry
from aql_mcp.protocol.task_mapping import TaskStatusReporter
from aql_mcp.settings import Settings
from aql_mcp.store.base import Store

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
    except Exception as exc:  # a module that fails while it runs: the plugin is broken, not the service
        raise ConfigError(f"plugin {path!r}: importing {module_name} failed ({type(exc).__name__}: {exc})") from None
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
    sources: Iterable[str | PluginSource],
    registry: Registry,
    settings: Settings | None = None,
    store: Store | None = None,
    telemetry: Telemetry | None = None,
    objects: Sequence[AnyPlugin] = (),
    task_status: TaskStatusReporter | None = None,
) -> list[AnyPlugin]:
    """Import every plugin, hand each its own settings, and let it register; a duplicate name
    fails naming both plugins. `objects` are plugins already built, registered after the imported
    ones (the test client, aql_mcp.testing.client). `task_status` is where plugins report their
    tasks' status changes (the app binds it to its notifier).

    The MCP-AQL service (router, `introspect`, endpoint tools) is set up when the first plugin with
    operations loads; without such a plugin the service exposes no MCP-AQL tools.
    """
    settings = settings or Settings()
    named = [source if isinstance(source, PluginSource) else PluginSource(source) for source in sources]
    plugins = [_import(source, settings) for source in named]
    for candidate in objects:
        if not isinstance(candidate, (Plugin, OperationsPlugin)):
            raise ConfigError(f"plugin {candidate!r}: not a plugin (see aql_mcp.plugin.Plugin and OperationsPlugin)")
        plugins.append(candidate)
        named.append(PluginSource(f"{type(candidate).__module__}.{type(candidate).__qualname__}", "object"))
    _refuse_twins(plugins, named)
    _refuse_listed_and_disabled(plugins, named, settings)
    refuse_unknown_sections(settings.plugins, plugins)
    service: AqlService | None = None
    for plugin in plugins:
        registry.plugin = plugin.name
        configure_plugin(plugin, settings.plugins)
        if isinstance(plugin, Plugin):
            _step(plugin.name, "register", partial(plugin.register, registry))
        if isinstance(plugin, OperationsPlugin):
            if plugin.trust not in TRUST_LEVELS:
                raise ConfigError(
                    f"plugin {plugin.name}: trust {plugin.trust!r} is not one of {', '.join(TRUST_LEVELS)}"
                )
            if service is None:
                if store is None:
                    raise ConfigError(f"plugin {plugin.name}: MCP-AQL operations need the service store")
                service = AqlService(registry, settings, store, telemetry, task_status)
            trust = _trust(plugin, settings)
            operations = service.for_plugin(plugin.name, trust, plugin.trust)
            _step(plugin.name, "register_operations", partial(plugin.register_operations, operations))
    registry.plugin = "runtime"
    _check_overrides(plugins, settings)
    return plugins


def _step(name: str, step: str, action: Callable[[], None]) -> None:
    """One of the plugin's own calls; our ConfigErrors (a duplicate tool, a bad schema) pass as
    they are, anything else becomes one naming only the exception's type: its message or a
    traceback could quote a secret setting's value."""
    try:
        action()
    except ConfigError:
        raise
    except Exception as exc:
        raise ConfigError(f"plugin {name}: {step} failed ({type(exc).__name__})") from None


def _import(source: PluginSource, settings: Settings) -> AnyPlugin:
    """The plugin of one source; an entry point's errors name the package and the entry point."""
    if source.entry_point is None:
        return import_plugin(source.path, settings)
    try:
        plugin = import_plugin(source.path, settings)
    except ConfigError as exc:
        raise ConfigError(f"{source.origin}: {exc}") from None
    if plugin.name != source.entry_point:
        raise ConfigError(
            f"{source.origin} ({source.path}): the plugin is named {plugin.name!r}; an entry point's "
            "name must be the name of the plugin it loads"
        )
    return plugin


def _refuse_listed_and_disabled(plugins: list[AnyPlugin], sources: list[PluginSource], settings: Settings) -> None:
    """A plugin named by a list and disabled by name contradicts itself: which one the operator meant
    is a guess, so startup refuses rather than silently loading (or leaving out) the plugin."""
    disabled = set(settings.server.disabled_plugins)
    for plugin, source in zip(plugins, sources, strict=True):
        if plugin.name in disabled and source.origin in ("server.plugins", "server.builtin_plugins"):
            raise ConfigError(
                f"plugin {plugin.name!r} is listed in {source.origin} ({source.path}) and disabled in "
                "server.disabled_plugins (AQL_MCP_SERVER__DISABLED_PLUGINS); remove it from one"
            )


def _refuse_twins(plugins: list[AnyPlugin], sources: list[PluginSource]) -> None:
    """Two plugins with one name would share a `plugins.<name>` section and a trust override."""
    seen: dict[str, PluginSource] = {}
    for plugin, source in zip(plugins, sources, strict=True):
        first = seen.setdefault(plugin.name, source)
        if first is not source:
            raise ConfigError(
                f"plugin name {plugin.name!r} is loaded twice: {first.path} ({first.origin}) "
                f"and {source.path} ({source.origin})"
            )


def check_trust(plugins: Iterable[AnyPlugin], settings: Settings) -> None:
    """`check-config`'s gate: a plugin that declares more trust than `aql.max_trust` allows runs
    lowered (`serve` warns); here that is a failure unless `aql.plugin_trust.<name>` says what it
    runs with, explicitly, even above the cap."""
    aql = settings.aql
    for plugin in plugins:
        if not isinstance(plugin, OperationsPlugin) or plugin.name in aql.plugin_trust:
            continue
        trust = effective_trust(plugin.name, plugin.trust, ceiling=aql.max_trust, overrides=aql.plugin_trust)
        if trust != plugin.trust:
            raise ConfigError(
                f"plugin {plugin.name}: declares trust {plugin.trust!r}, above aql.max_trust "
                f"(AQL_MCP_AQL__MAX_TRUST) {aql.max_trust!r}: it would run at {trust!r}. Raise aql.max_trust, "
                f"or accept a trust for it explicitly with aql.plugin_trust.{plugin.name} "
                f'(AQL_MCP_AQL__PLUGIN_TRUST=\'{{"{plugin.name}": "{trust}"}}\')'
            )


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
