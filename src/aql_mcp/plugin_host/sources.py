"""Where plugins come from: the built-in list, `server.plugins`, and installed packages.

An installed package offers a plugin through an entry point in the group `aql_mcp.plugins`
(`greeter = "greeter_plugin:plugin"` in its pyproject.toml): installing the package is enough.
The entry point's name is the plugin's name, so an operator can leave one out by name
(`server.disabled_plugins`) without importing it, or every one (`server.entry_point_plugins: false`).

The order is deterministic: `server.builtin_plugins`, then `server.plugins`, then entry points
sorted by name; an import string already listed is loaded once, from the list that names it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points

from aql_mcp.exceptions import ConfigError
from aql_mcp.settings import Settings

ENTRY_POINT_GROUP = "aql_mcp.plugins"


@dataclass(frozen=True)
class PluginSource:
    """One plugin to load: its import string, and where it was named (for logs and errors)."""

    path: str
    origin: str = "argument"
    # An entry point's name, which the plugin it loads must carry as its `name`.
    entry_point: str | None = None


def plugin_sources(settings: Settings, installed: Iterable[EntryPoint] | None = None) -> list[PluginSource]:
    """Every plugin the settings and the installed packages ask for, in load order.

    With `server.entry_point_plugins: false` no entry point is read at all (a broken or clashing
    installation cannot stop the service), and a name in `server.disabled_plugins` is left out
    before anything about it is checked, even two packages offering it.
    """
    server = settings.server
    builtin = set(server.builtin_plugins)
    listed = [
        PluginSource(path, "server.builtin_plugins" if path in builtin else "server.plugins")
        for path in settings.plugin_paths
    ]
    if not server.entry_point_plugins:
        return listed
    found = list(entry_points(group=ENTRY_POINT_GROUP) if installed is None else installed)
    disabled = set(server.disabled_plugins)
    _refuse_unknown_disabled(disabled, {point.name for point in found})
    offered = _unique(point for point in found if point.name not in disabled)
    paths = set(settings.plugin_paths)
    extra = [PluginSource(point.value, describe(point), point.name) for point in offered if point.value not in paths]
    return listed + extra


def describe(point: EntryPoint) -> str:
    """`entry point greeter of greeter-plugin 0.1.0`: what an operator needs to find the package."""
    dist = getattr(point, "dist", None)
    package = f" of {dist.name} {dist.version}" if dist is not None else ""
    return f"entry point {point.name}{package}"


def _unique(found: Iterable[EntryPoint]) -> list[EntryPoint]:
    """Sorted by name; the same entry point seen twice on the path counts once, and two packages
    offering one name fail here, naming both, before either is imported."""
    by_name: dict[str, EntryPoint] = {}
    for point in sorted(found, key=lambda p: (p.name, p.value)):
        seen = by_name.get(point.name)
        if seen is None:
            by_name[point.name] = point
        elif seen.value != point.value:
            raise ConfigError(
                f"plugin {point.name!r} is offered twice ({ENTRY_POINT_GROUP}): by {describe(seen)} "
                f"({seen.value}) and by {describe(point)} ({point.value}); uninstall one"
            )
    return list(by_name.values())


def _refuse_unknown_disabled(disabled: Iterable[str], names: set[str]) -> None:
    """A name that no installed package offers is a typo that would silently disable nothing."""
    unknown = sorted(set(disabled) - names)
    if unknown:
        raise ConfigError(
            f"server.disabled_plugins (AQL_MCP_SERVER__DISABLED_PLUGINS): no installed package offers "
            f"{', '.join(unknown)}; installed ({ENTRY_POINT_GROUP}): {', '.join(sorted(names)) or 'none'}"
        )
