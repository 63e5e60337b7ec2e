"""The conformance triggers change the tool and prompt lists for real (testing/list_changes.py)."""

from __future__ import annotations

import pytest

from aql_mcp.protocol.primitives import Kind, Registry
from aql_mcp.testing.list_changes import DYNAMIC_PROMPT, DYNAMIC_TOOL, ListChanges, register_list_changes

pytestmark = pytest.mark.anyio


def watched_registry() -> tuple[Registry, list[Kind]]:
    registry = Registry()
    changes: list[Kind] = []
    registry.on_change(changes.append)
    return registry, changes


async def test_the_tool_trigger_adds_then_removes_a_tool_each_time_a_change() -> None:
    registry, changes = watched_registry()
    triggers = ListChanges(registry)

    await triggers.toggle_tool({}, None)  # type: ignore[arg-type]
    assert registry.tool(DYNAMIC_TOOL) is not None
    await triggers.toggle_tool({}, None)  # type: ignore[arg-type]
    assert registry.tool(DYNAMIC_TOOL) is None
    assert changes == ["tool", "tool"]


async def test_the_prompt_trigger_adds_then_removes_a_prompt_each_time_a_change() -> None:
    registry, changes = watched_registry()
    triggers = ListChanges(registry)

    await triggers.toggle_prompt({}, None)  # type: ignore[arg-type]
    assert registry.prompt(DYNAMIC_PROMPT) is not None
    await triggers.toggle_prompt({}, None)  # type: ignore[arg-type]
    assert registry.prompt(DYNAMIC_PROMPT) is None
    assert changes == ["prompt", "prompt"]


def test_both_triggers_are_registered_as_tools() -> None:
    registry = Registry()
    register_list_changes(registry)

    assert registry.tool("test_trigger_tool_change") is not None
    assert registry.tool("test_trigger_prompt_change") is not None
