"""Metrics of the work a replica runs in the background (docs/monitoring.md): generic tasks of the
Tasks extension (`task_kind="task"`) and MCP-AQL executions (`task_kind="execution"`), live, finished
by status, and taken over from replicas that were lost (docs/executions.md, "Leases and takeover").
The label names are their own (`task_*`), so no other family's `kind` or `status` gains values."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge

KINDS = ("task", "execution")
STATUSES = ("completed", "failed", "cancelled")
# What became of a taken-over piece of work: resumed here, or ended (failed retryable, cancelled).
TAKEOVER_OUTCOMES = ("resumed", "ended")


class TaskMeter:
    """What the task runner and the executions worker report; one per app registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._live = Gauge(
            "aql_mcp_live_tasks",
            "Tasks and executions this replica runs now, by kind.",
            ("task_kind",),
            registry=registry,
        )
        self._finished = Counter(
            "aql_mcp_tasks_finished_total",
            "Tasks and executions whose end this replica recorded, by kind and status.",
            ("task_kind", "task_status"),
            registry=registry,
        )
        self._takeovers = Counter(
            "aql_mcp_task_takeovers_total",
            "Tasks and executions of lost replicas (their lease ran out) this replica took over, by kind and outcome.",
            ("task_kind", "task_outcome"),
            registry=registry,
        )
        # Known label values start at 0, so a rate() or increase() sees the first event.
        for kind in KINDS:
            self._live.labels(task_kind=kind)
            for status in STATUSES:
                self._finished.labels(task_kind=kind, task_status=status)
            for outcome in TAKEOVER_OUTCOMES:
                self._takeovers.labels(task_kind=kind, task_outcome=outcome)

    def track(self, kind: str, live: Callable[[], int]) -> None:
        """Read how many of `kind` run here when scraped."""
        self._live.labels(task_kind=_known(kind, KINDS)).set_function(live)

    def finished(self, kind: str, status: str) -> None:
        if status in STATUSES:
            self._finished.labels(task_kind=_known(kind, KINDS), task_status=status).inc()

    def takeover(self, kind: str, outcome: str) -> None:
        self._takeovers.labels(task_kind=_known(kind, KINDS), task_outcome=_known(outcome, TAKEOVER_OUTCOMES)).inc()


def _known(value: str, allowed: tuple[str, ...]) -> str:
    # A label value outside the known ones would grow the series without bound: fold it.
    return value if value in allowed else allowed[-1]
