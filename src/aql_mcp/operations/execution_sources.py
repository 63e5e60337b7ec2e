"""Execution sources: the executions one plugin starts, made visible to another's lifecycle
operations (MCP-AQL §8.4; docs/executions.md, "Agent runs").

`get_execution`, `list_executions` and `cancel_execution` belong to the executions plugin, but the
safety plugin's agent runs (`execute_agent`) are executions too. Neither plugin imports the other:
a plugin that starts executions of its own adds an `ExecutionSource` here
(`PluginOperations.add_execution_source`) and the lifecycle operations consult every source at call
time, so the order in which plugins register does not matter.

Every execution id has one format, `exec_` and 24 lowercase hex digits (`new_execution_id`); the
32-digit ids of the agent runs that release 0.2.0 and older wrote are still accepted wherever an
id is read (`EXECUTION_ID_PATTERN`).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from aql_mcp.operations.models import Call

# What every execution id parameter accepts: today's ids, and the older agent runs' 32-digit ones.
EXECUTION_ID_PATTERN = r"^exec_(?:[0-9a-f]{24}|[0-9a-f]{32})$"


def new_execution_id() -> str:
    """A new execution's id: `exec_` and 96 random bits as 24 hex digits."""
    return "exec_" + secrets.token_hex(12)


@dataclass(frozen=True, slots=True)
class SourcedExecution:
    """One execution of a source as `list_executions` shows it: its wire form (MCP-AQL §8.4.3,
    with `execution_id`, `status` in the core states and `kind`) and its creation time, by which
    the lists of every source are merged newest first."""

    created_at: float
    wire: dict[str, Any]


class ExecutionSource(Protocol):
    """Executions a plugin keeps in its own tables. Each method sees only the caller's own
    executions: another caller's is unknown (None), as it is to the executions plugin.

    A source may also name the operations that start its executions in a `starts` attribute (a
    tuple of operation names, EXECUTE operations): a 2026-07-28 call of one of them by a client
    that declares the Tasks extension is then answered as a task (docs/executions.md)."""

    @property
    def kind(self) -> str:
        """The `kind` its executions show (`agent` for the safety plugin's runs)."""
        ...

    async def get_execution(self, execution_id: str, call: Call) -> dict[str, Any] | None:
        """The execution's wire form, or None when the caller has no such execution here."""
        ...

    async def list_executions(self, call: Call, *, status: str | None, limit: int) -> list[SourcedExecution]:
        """The caller's executions, newest first, at most `limit`; only those whose core state is
        `status` when given."""
        ...

    async def cancel_execution(self, execution_id: str, call: Call) -> dict[str, Any] | None:
        """§8.4.4: move a live execution to `cancelled`. The wire form afterwards with `cancelled`
        (whether this call cancelled it; false when it had ended), or None when the caller has no
        such execution here. Raises `OperationError` to refuse, saying why."""
        ...


class ExecutionSources:
    """The sources the plugins added, in the order they were added."""

    def __init__(self) -> None:
        self._sources: list[ExecutionSource] = []

    def add(self, source: ExecutionSource) -> None:
        self._sources.append(source)

    def __iter__(self) -> Iterator[ExecutionSource]:
        return iter(list(self._sources))
