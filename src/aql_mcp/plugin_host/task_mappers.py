"""The task mappers the loaded plugins offer, one per era at most (plugin_host/contracts.py,
`TaskMapperPlugin` and `ModernTaskMapperPlugin`; docs/plugins.md, "HTTP routes, banner lines and
tasks"): two plugins mapping the same calls would each claim the other's tasks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from aql_mcp.exceptions import ConfigError
from aql_mcp.plugin_host.contracts import ModernTaskMapperPlugin, TaskMapperPlugin
from aql_mcp.plugin_host.loader import AnyPlugin
from aql_mcp.protocol.task_mapping import ModernTaskMapper, TaskMapper

# A plugin's task mapper, of either era.
M = TypeVar("M")


def task_mapper(plugins: Sequence[AnyPlugin]) -> TaskMapper | None:
    """The legacy task mapper a plugin offers (protocol/task_mapping.py); at most one plugin may."""
    offered = [(p.name, p.task_mapper()) for p in plugins if isinstance(p, TaskMapperPlugin)]
    return only_one(offered, "maps MCP 2025-11-25 tasks")


def modern_task_mapper(plugins: Sequence[AnyPlugin]) -> ModernTaskMapper | None:
    """The 2026-07-28 task mapper a plugin offers (protocol/task_mapping.py); at most one plugin may."""
    offered = [(p.name, p.modern_task_mapper()) for p in plugins if isinstance(p, ModernTaskMapperPlugin)]
    return only_one(offered, "maps calls onto 2026-07-28 tasks")


def only_one(offered: list[tuple[str, M | None]], what: str) -> M | None:
    found = [(name, mapper) for name, mapper in offered if mapper is not None]
    if len(found) > 1:
        raise ConfigError(f"plugins {', '.join(name for name, _ in found)}: each {what}; at most one plugin may")
    return found[0][1] if found else None
