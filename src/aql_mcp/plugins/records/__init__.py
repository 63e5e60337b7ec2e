"""The built-in `records` plugin: an agent workspace of JSON records in named collections (docs/aql.md).

`aql_mcp.plugins.records:plugin` is the name deployments load it by (`server.builtin_plugins`). The
plugin is imported on first use of that name, not with the package, so that importing one module of
the package (its storage facet, its parameter models) does not load the whole plugin. `plugin` is
a factory: each service gets a plugin of its own, whose housekeeping purges that service's store.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "plugin":
        from aql_mcp.plugins.records.catalog import plugin

        return plugin
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
