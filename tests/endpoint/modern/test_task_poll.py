"""The replica's one poll of its tasks (endpoint/modern/task_poll.py, docs/eras.md "Tasks"): it
renews their leases, fails the tasks of a lost replica whatever replica polls, and every status the
runner sets reaches its listeners and the task metrics."""

from __future__ import annotations

import time
from typing import Any

import pytest

from aql_mcp.endpoint.legacy.sessions import SessionManager
from aql_mcp.endpoint.modern.endpoint import RequestPeer
from aql_mcp.endpoint.modern.task_poll import REPLICA_LOST
from aql_mcp.endpoint.modern.tasks_extension import EXTENSION, OnStatus, StatusChange, TaskRunner
from aql_mcp.observability.metrics import Metrics
from aql_mcp.protocol.context import Context
from aql_mcp.protocol.primitives import Registry, Tool
from aql_mcp.store.base import Store
from aql_mcp.store.tasks import TaskRecord, TaskStatus
from tests.support.engines import Backend
from tests.support.wait import arrives, eventually

pytestmark = pytest.mark.anyio
WITH_TASKS = {"elicitation": {}, "extensions": {EXTENSION: {}}}
QUESTION = {"method": "elicitation/create", "params": {"mode": "form", "message": "ok?", "requestedSchema": {}}}


def _runner(store: Store, lease: float = 15.0, on_status: OnStatus | None = None) -> TaskRunner:
    hub = SessionManager(store, idle_seconds=60, max_open=10, retry_after=1)
    return TaskRunner(
        store.tasks,
        hub=hub,
        ttl_seconds=60,
        max_per_owner=5,
        max_result_bytes=100_000,
        lease_seconds=lease,
        on_status=on_status,
    )


def _context(store: Store) -> Context:
    peer = RequestPeer(version="2026-07-28", info={}, caps=WITH_TASKS, log_level="off")
    hub = SessionManager(store, idle_seconds=60, max_open=10, retry_after=1)
    # The runner gives the task's handler an outbound of its own; the request's is never used.
    return Context(request_id="r1", message_id=1, peer=peer, principal=None, outbound=None, hub=hub)  # type: ignore[arg-type]


async def _ask(arguments: dict[str, Any], ctx: Context) -> str:
    answers = await ctx.ask({"q": QUESTION})
    return str(answers["q"]["action"])


async def test_every_status_the_runner_sets_reaches_its_listeners_and_the_metrics(store: Store) -> None:
    registry = Registry()
    registry.add_tool(Tool("asks", "asks once", _ask, task_support="optional"))
    entry = registry.tool("asks")
    assert entry is not None
    metrics = Metrics(service="s", version="1")
    heard: list[tuple[str, TaskStatus]] = []

    async def on_status(change: StatusChange) -> None:
        heard.append((change.task_id, change.status))
        metrics.tasks.finished("task", change.status)

    runner = _runner(store, on_status=on_status)
    metrics.tasks.track("task", lambda: runner.running)
    try:
        created = await runner.launch(entry, {}, _context(store))
        assert created is not None
        task_id = created["taskId"]
        await eventually(lambda: (task_id, "input_required") in heard, "the question did not park the task")
        assert _sample(metrics, "aql_mcp_live_tasks", task_kind="task") == 1
        await _answer(store, task_id)
        await eventually(lambda: (task_id, "completed") in heard, "the answered task did not complete")
    finally:
        await runner.close()
    # `working` is what the CreateTaskResult said: the changes after it are told.
    assert [status for _, status in heard] == ["input_required", "working", "completed"]
    assert _sample(metrics, "aql_mcp_tasks_finished_total", task_kind="task", task_status="completed") == 1
    assert _sample(metrics, "aql_mcp_live_tasks", task_kind="task") == 0


async def test_a_cancellation_from_any_replica_is_heard_once_by_the_replica_running_the_task(
    backend: Backend,
) -> None:
    store, elsewhere = await backend.open(), await backend.open()
    registry = Registry()
    registry.add_tool(Tool("asks", "asks once", _ask, task_support="optional"))
    entry = registry.tool("asks")
    assert entry is not None
    heard: list[TaskStatus] = []

    async def on_status(change: StatusChange) -> None:
        heard.append(change.status)

    runner = _runner(store, on_status=on_status)
    try:
        created = await runner.launch(entry, {}, _context(store))
        assert created is not None
        await eventually(lambda: "input_required" in heard, "the question did not park the task")
        assert await elsewhere.tasks.cancel_task(created["taskId"], "anonymous", time.time())
        await eventually(lambda: runner.running == 0, "the cancelled task kept running")
    finally:
        await runner.close()
    assert heard == ["input_required", "cancelled"]


async def test_a_polling_replica_fails_the_tasks_of_a_lost_one_once_their_lease_ran_out(backend: Backend) -> None:
    lost, alive = await backend.open(), await backend.open()
    now = time.time()
    record = TaskRecord("t1", "alice", "slow", "working", now, now, now + 600, 600_000, 1000)
    assert await lost.tasks.create_task(
        record, max_live_per_owner=5, max_stored_per_owner=50, now=now, lease_seconds=0.3
    )
    told: list[StatusChange] = []

    async def on_status(change: StatusChange) -> None:
        told.append(change)

    runner = _runner(alive, lease=0.6, on_status=on_status)
    taken: list[str] = []
    runner.on_takeover(taken.append)
    runner.start()  # polls (and takes over) with no task of its own
    try:
        await eventually(lambda: taken == ["t1"], "the lost replica's task was not taken over")
    finally:
        await runner.close()
    # Told as any status change, so its owner's listen streams hear of it (task status notifications).
    assert told == [StatusChange("t1", "alice", "failed", REPLICA_LOST)]
    found = await alive.tasks.load_task("t1")
    assert found is not None
    assert (found.status, found.status_message) == ("failed", REPLICA_LOST)
    assert found.error is not None
    assert found.error["code"] == -32006


async def test_the_poll_keeps_the_leases_of_the_tasks_it_runs(backend: Backend) -> None:
    """A task that outlives its lease many times over is not taken over while its replica polls."""
    store, other = await backend.open(), await backend.open()
    registry = Registry()
    registry.add_tool(Tool("asks", "asks once", _ask, task_support="optional"))
    entry = registry.tool("asks")
    assert entry is not None
    runner = _runner(store, lease=0.6)
    try:
        created = await runner.launch(entry, {}, _context(store))
        assert created is not None
        started = time.monotonic()

        async def outlived() -> bool:
            taken = await other.tasks.take_over_tasks({"code": -32006, "message": "x"}, REPLICA_LOST, time.time())
            assert taken == [], "a renewed lease was taken over"
            return time.monotonic() - started > 3.0  # five leases

        await arrives(outlived, "the check did not end")
    finally:
        await runner.close()


async def _answer(store: Store, task_id: str) -> None:
    """The client's `tasks/update`, as the task's owner."""
    record = await store.tasks.load_task(task_id)
    assert record is not None
    await store.tasks.answer_task(task_id, record.owner, {"q": {"action": "accept"}}, time.time())


def _sample(metrics: Metrics, name: str, **labels: str) -> float:
    value = metrics.registry.get_sample_value(name, labels)
    assert value is not None, name
    return value
