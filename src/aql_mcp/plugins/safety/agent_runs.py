"""Agent runs as executions (MCP-AQL §8.4; docs/safety.md, "Agent runs and the execution lifecycle").

The safety plugin adds `AgentRunSource` to the service's execution sources, so the executions
plugin's `get_execution`, `list_executions` and `cancel_execution` reach the runs `execute_agent`
starts without either plugin importing the other. A run shows its own state (`state`) and the core
state it maps to (`status`, §8.4.4), with `kind: "agent"`.
"""

from __future__ import annotations

from typing import Any

from aql_mcp.plugin import Call, SourcedExecution, TypeDef, principal_key
from aql_mcp.plugins.safety.directive import iso
from aql_mcp.plugins.safety.loop import ExecutionLoop
from aql_mcp.plugins.safety.store import RUN_STATUSES, AgentRun, RunStatus, SafetyStore

KIND = "agent"
# §8.4.4: each state of a run and the core state it maps to. A paused or blocked run is still inside
# the loop (it resumes once a human decides); an aborted one ended abnormally, as a failed one does,
# but is never retried (`execute_agent` starts a new one).
CORE_STATE: dict[RunStatus, str] = {
    "running": "running",
    "paused": "running",
    "blocked": "running",
    "completed": "completed",
    "aborted": "failed",
    "cancelled": "cancelled",
}
MEANING: dict[RunStatus, str] = {
    "running": "steps are evaluated as they are reported",
    "paused": "waiting for an operator (confirm_operation) or a verify-tier challenge",
    "blocked": "the agent is hard-blocked until out-of-band verification (verify_challenge)",
    "completed": "ended by complete_execution",
    "aborted": "ended by abort_execution",
    "cancelled": "ended by cancel_execution",
}
STATE_TYPE = TypeDef(
    "AgentRunState",
    "enum",
    "The states of an execute_agent run and the MCP-AQL core state each maps to (§8.4.4): "
    + "; ".join(f"{state} -> {CORE_STATE[state]} ({MEANING[state]})" for state in RUN_STATUSES)
    + ". get_execution and list_executions show the core state as status and this one as state.",
    {"values": RUN_STATUSES},
)


def run_wire(run: AgentRun) -> dict[str, Any]:
    """A run as `get_execution` shows it (§8.4.3)."""
    out: dict[str, Any] = {
        "execution_id": run.id,
        "status": CORE_STATE[run.status],
        "kind": KIND,
        "state": run.status,
        "element_name": run.agent,
        "created_at": iso(run.started_at),
        "started_at": iso(run.started_at),
        "updated_at": iso(run.updated_at),
        "progress": {"current": run.steps, "message": f"{run.steps} step(s) reported; {run.status}"},
        "steps": run.steps,
    }
    if run.ended_at is not None:
        out["finished_at"] = iso(run.ended_at)
    if run.reason:
        out["reason"] = run.reason
    return out


class AgentRunSource:
    """The caller's own runs (its principal's), for the executions plugin's lifecycle operations."""

    kind = KIND
    # The operation that starts these executions: a 2026-07-28 client that declares the Tasks
    # extension gets its call as a task (docs/executions.md, "MCP tasks (2026-07-28)").
    starts = ("execute_agent",)

    def __init__(self, store: SafetyStore, loop: ExecutionLoop) -> None:
        self._store = store
        self._loop = loop

    async def get_execution(self, execution_id: str, call: Call) -> dict[str, Any] | None:
        run = await self._store.get_run(execution_id)
        if run is None or run.principal != principal_key(call.principal):
            return None
        return run_wire(run)

    async def list_executions(self, call: Call, *, status: str | None, limit: int) -> list[SourcedExecution]:
        states = None if status is None else [state for state in RUN_STATUSES if CORE_STATE[state] == status]
        runs = await self._store.list_runs(principal_key(call.principal), states, limit)
        return [SourcedExecution(run.started_at, run_wire(run)) for run in runs]

    async def cancel_execution(self, execution_id: str, call: Call) -> dict[str, Any] | None:
        found = await self._loop.cancel(principal_key(call.principal), execution_id)
        if found is None:
            return None
        run, cancelled = found
        return {**run_wire(run), "cancelled": cancelled}
