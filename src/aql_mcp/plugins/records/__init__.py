"""The built-in `records` plugin: an agent workspace of JSON records in named collections (docs/aql.md).

`aql_mcp.plugins.records:plugin` is the name deployments load it by (`server.builtin_plugins`).
"""

from aql_mcp.plugins.records.catalog import plugin

__all__ = ["plugin"]
