"""Fixtures that change the tool and prompt lists on demand, for the 2026-07-28 conformance suite.

Its `server-stateless` scenario opens a `subscriptions/listen` stream, calls
`test_trigger_tool_change` or `test_trigger_prompt_change`, and expects
`notifications/tools/list_changed` or `notifications/prompts/list_changed` on the stream (and not
the other one). The triggers change the registry for real: each call adds a fixture tool (prompt)
or takes it away again, so the notification travels the path every list change takes (registry
listener, app.py, endpoint/notifier.py) and `tools/list` shows the change.
"""

from __future__ import annotations

from typing import Any

from aql_mcp.protocol.content import Content, message, text
from aql_mcp.protocol.context import Context
from aql_mcp.protocol.primitives import Prompt, Registry, Tool

DYNAMIC_TOOL = "test_dynamic_tool"
DYNAMIC_PROMPT = "test_dynamic_prompt"


async def dynamic_tool(_arguments: dict[str, Any], _ctx: Context) -> str:
    return "This tool comes and goes with test_trigger_tool_change."


async def dynamic_prompt(_arguments: dict[str, str], _ctx: Context) -> list[Content]:
    return [message("user", text("This prompt comes and goes with test_trigger_prompt_change."))]


class ListChanges:
    """The two triggers, bound to the registry they change."""

    def __init__(self, registry: Registry) -> None:
        self._registry = registry

    async def toggle_tool(self, _arguments: dict[str, Any], _ctx: Context) -> str:
        if self._registry.tool(DYNAMIC_TOOL) is not None:
            self._registry.remove_tool(DYNAMIC_TOOL)
            return f"{DYNAMIC_TOOL} removed"
        self._registry.add_tool(Tool(DYNAMIC_TOOL, "Added by test_trigger_tool_change", dynamic_tool))
        return f"{DYNAMIC_TOOL} added"

    async def toggle_prompt(self, _arguments: dict[str, Any], _ctx: Context) -> str:
        if self._registry.prompt(DYNAMIC_PROMPT) is not None:
            self._registry.remove_prompt(DYNAMIC_PROMPT)
            return f"{DYNAMIC_PROMPT} removed"
        self._registry.add_prompt(Prompt(DYNAMIC_PROMPT, "Added by test_trigger_prompt_change", dynamic_prompt))
        return f"{DYNAMIC_PROMPT} added"


def register_list_changes(registry: Registry) -> None:
    changes = ListChanges(registry)
    registry.add_tool(
        Tool("test_trigger_tool_change", "Adds or removes a tool (tools list changes)", changes.toggle_tool)
    )
    registry.add_tool(
        Tool("test_trigger_prompt_change", "Adds or removes a prompt (prompts list changes)", changes.toggle_prompt)
    )
