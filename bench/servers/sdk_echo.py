"""The official `mcp` SDK's server with the same `echo(text)` tool: the reference to compare with.

Run with `uvicorn --app-dir bench/servers --factory sdk_echo:stateless_json` (or `:stateful_sse`).
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer
from starlette.applications import Starlette


def build_server() -> MCPServer:
    # WARNING, as uvicorn's --log-level: the SDK's default INFO adds a stderr line per session.
    server = MCPServer("bench-sdk", log_level="WARNING")

    @server.tool()
    async def echo(text: str) -> str:
        """Returns the given text unchanged."""
        return text

    return server


def stateless_json() -> Starlette:
    return build_server().streamable_http_app(stateless_http=True, json_response=True)


def stateful_sse() -> Starlette:
    return build_server().streamable_http_app(stateless_http=False, json_response=False)
