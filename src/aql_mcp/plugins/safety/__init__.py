"""The built-in `safety` plugin: the MCP-AQL execution safety loop, its operator desk and console (docs/safety.md).

`aql_mcp.plugins.safety:plugin` is the name deployments load it by (`server.builtin_plugins`).
"""

from aql_mcp.plugins.safety.operations import plugin

__all__ = ["plugin"]
