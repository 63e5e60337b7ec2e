"""The built-in `corporate` plugin: the Avatar-profile prompts and meta resources (corporate §10, §11).

`aql_mcp.plugins.corporate:plugin` is the name deployments load it by (`server.builtin_plugins`).
"""

from aql_mcp.plugins.corporate.profile import plugin

__all__ = ["plugin"]
