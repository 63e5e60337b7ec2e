"""The core's calls into plugins: each hook goes to every loaded plugin that has its method
(plugin_host/contracts.py, `SessionEndPlugin` and `HousekeepingPlugin`), so the core never names a
plugin (docs/plugins.md, "Hooks")."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import structlog

from aql_mcp.plugin_host.contracts import HousekeepingPlugin, SessionEndPlugin

log = structlog.get_logger("aql_mcp.plugins")


class PluginHooks:
    """The loaded plugins that subscribed to a hook, in the order they loaded."""

    def __init__(self, plugins: Iterable[object] = ()) -> None:
        loaded = list(plugins)
        self._session_end = [plugin for plugin in loaded if isinstance(plugin, SessionEndPlugin)]
        self._housekeeping = [plugin for plugin in loaded if isinstance(plugin, HousekeepingPlugin)]

    async def session_end(self, session_ids: Sequence[str], now: float) -> None:
        """Sessions ended (deleted or expired); a plugin's failure reaches the caller, as the
        store's own would."""
        for plugin in self._session_end:
            await plugin.on_session_end(session_ids, now)

    async def housekeeping(self, now: float) -> None:
        """Each plugin's clean-up; one that fails is logged and does not keep the next from running."""
        for plugin in self._housekeeping:
            try:
                await plugin.housekeeping(now)
            except Exception:
                log.exception("housekeeping_failed", plugin=getattr(plugin, "name", type(plugin).__name__))
