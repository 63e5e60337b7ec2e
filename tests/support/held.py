"""A test plugin with one tool that is held until the test lets it go (`tests.support.held:plugin`):
it reports progress once, then stays silent until the file named by its `release` argument
exists, then reports again and returns. So a test knows the first progress event left the server
while the call was still running, and a gateway sees nothing but the service's keep-alive comments
for as long as the test likes."""

from __future__ import annotations

from typing import Any

import anyio

from aql_mcp.protocol.content import Content, text
from aql_mcp.protocol.context import Context
from aql_mcp.protocol.primitives import Registry, Tool

POLL_SECONDS = 0.05


async def held(arguments: dict[str, Any], ctx: Context) -> list[Content]:
    release = anyio.Path(str(arguments["release"]))
    await ctx.progress(0, 1, "held")
    # The test that releases the call is another process: a file it creates is what it can signal with.
    while not await release.exists():  # noqa: ASYNC110
        await anyio.sleep(POLL_SECONDS)
    await ctx.progress(1, 1, "released")
    return [text("released")]


class HeldPlugin:
    name = "held"

    def register(self, registry: Registry) -> None:
        schema = {
            "type": "object",
            "properties": {"release": {"type": "string", "description": "The file whose existence releases the call"}},
            "required": ["release"],
            "additionalProperties": False,
        }
        registry.add_tool(Tool("test_held", "Reports progress, then waits until a file exists", held, schema))


plugin = HeldPlugin()
