"""aql-mcp: a corporate-profile Streamable HTTP MCP server fronting an MCP-AQL operation router."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("aql-mcp")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0"
