"""The built-in `executions` plugin: imports and exports that run in the background (docs/executions.md).

`aql_mcp.plugins.executions:plugin` is the name deployments load it by (`server.builtin_plugins`).
"""

from aql_mcp.plugins.executions.registration import plugin

__all__ = ["plugin"]
