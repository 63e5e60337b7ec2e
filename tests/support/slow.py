"""A test plugin with one slow tool, so a call is still running when a test cancels it or stops
the replica running it (`tests.support.slow:plugin`)."""

from __future__ import annotations

from typing import Any

import anyio
import structlog

from aql_mcp.protocol.content import Content, text
from aql_mcp.protocol.context import Context
from aql_mcp.protocol.primitives import Registry, Tool

STEPS = 100
STEP_SECONDS = 0.1

log = structlog.get_logger("tests.slow")


async def slow(arguments: dict[str, Any], ctx: Context) -> list[Content]:
    """Reports progress every 100 ms, `steps` times (100 by default); logs when it is cancelled."""
    steps = int(arguments.get("steps", STEPS))
    try:
        for step in range(steps):
            await ctx.progress(step, steps, f"step {step}")
            await anyio.sleep(STEP_SECONDS)
    except BaseException:
        log.info("slow_tool_stopped")
        raise
    return [text("done")]


class SlowPlugin:
    name = "slow"

    def register(self, registry: Registry) -> None:
        schema = {
            "type": "object",
            "properties": {"steps": {"type": "integer", "minimum": 1, "maximum": 600}},
            "additionalProperties": False,
        }
        registry.add_tool(Tool("test_slow", "Reports progress every 100 ms, `steps` times", slow, schema))


plugin = SlowPlugin()
