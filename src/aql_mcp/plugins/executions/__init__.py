"""The built-in `executions` plugin: imports and exports that run in the background (docs/executions.md).

`aql_mcp.plugins.executions:plugin` is the name deployments load it by (`server.builtin_plugins`). The
plugin is imported on first use of that name, not with the package, so that importing one module of
the package (its storage facet, its parameter models) does not load the whole plugin.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "plugin":
        from aql_mcp.plugins.executions.registration import plugin

        return plugin
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
