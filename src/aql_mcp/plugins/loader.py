"""Load plugins from `module:attribute` import strings, once, at startup."""

from __future__ import annotations

import importlib
from collections.abc import Iterable

from aql_mcp.exceptions import ConfigError
from aql_mcp.plugins.base import Plugin
from aql_mcp.registry import Registry
from aql_mcp.settings import Settings


def import_plugin(path: str, settings: Settings | None = None) -> Plugin:
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
    if not isinstance(candidate, Plugin) and callable(candidate):
        try:
            candidate = candidate(settings)
        except Exception as exc:
            raise ConfigError(
                f"plugin {path!r}: calling {attribute} did not make a plugin ({type(exc).__name__})"
            ) from exc
    if not isinstance(candidate, Plugin):
        raise ConfigError(f"plugin {path!r}: not a plugin (needs a `name` and `register(registry)`)")
    return candidate


def load_plugins(paths: Iterable[str], registry: Registry, settings: Settings | None = None) -> list[Plugin]:
    """Import every plugin and let it register; a duplicate name fails naming both plugins."""
    plugins = [import_plugin(path, settings) for path in paths]
    for plugin in plugins:
        registry.plugin = plugin.name
        plugin.register(registry)
    registry.plugin = "runtime"
    return plugins
