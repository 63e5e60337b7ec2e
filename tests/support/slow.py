"""A test plugin with one slow tool, so a call is still running when a test cancels it or stops
the replica running it (`tests.support.slow:plugin`). `step_seconds` longer than a gateway's read
timeout makes the call silent for longer than that between two progress notifications: only the
service's SSE keep-alives then keep the gateway from cutting it."""

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
    """Reports progress every `step_seconds` (100 ms by default), `steps` times (100 by default); logs
    when it is cancelled."""
    steps = int(arguments.get("steps", STEPS))
    pause = float(arguments.get("step_seconds", STEP_SECONDS))
    try:
        for step in range(steps):
            await ctx.progress(step, steps, f"step {step}")
            await anyio.sleep(pause)
    except BaseException:
        log.info("slow_tool_stopped")
        raise
    return [text("done")]


class SlowPlugin:
    name = "slow"

    def register(self, registry: Registry) -> None:
        schema = {
            "type": "object",
            "properties": {
                "steps": {"type": "integer", "minimum": 1, "maximum": 600},
                "step_seconds": {"type": "number", "minimum": 0.01, "maximum": 10},
            },
            "additionalProperties": False,
        }
        described = "Reports progress every `step_seconds` (100 ms), `steps` times"
        registry.add_tool(Tool("test_slow", described, slow, schema))


plugin = SlowPlugin()
