"""A one-tool plugin whose `echo` returns its input unchanged.

The benchmark calls it to measure the service's own overhead: the handler does no work, so what
a call costs is the transport, validation and dispatch around it (`aql_mcp.testing.echo:plugin`).
"""

from __future__ import annotations

from typing import Any

from aql_mcp.protocol.content import Content, text
from aql_mcp.protocol.context import Context
from aql_mcp.protocol.primitives import Registry, Tool


def echo_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"text": {"type": "string", "description": "The text to return unchanged"}},
        "required": ["text"],
        "additionalProperties": False,
    }


async def echo(arguments: dict[str, Any], _ctx: Context) -> list[Content]:
    return [text(arguments["text"])]


class EchoPlugin:
    """Registers the `echo` tool."""

    name = "echo"

    def register(self, registry: Registry) -> None:
        registry.add_tool(
            Tool(
                "echo",
                "Returns the given text unchanged, as one text block",
                echo,
                echo_schema(),
                title="Echo",
                annotations={"readOnlyHint": True, "idempotentHint": True, "openWorldHint": False},
            )
        )


plugin = EchoPlugin()
