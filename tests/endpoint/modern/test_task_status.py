"""Task status notifications (SEP-2663, "Task Status Notifications"; docs/eras.md, "Tasks"): the
runner reports each status change of a task it runs (`on_status`), the notifier hands it to the
owner's listen streams that asked for that task, here and through the bus, on a real store."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from starlette.types import Message

from aql_mcp.endpoint.legacy.sessions import SessionManager
from aql_mcp.endpoint.modern.endpoint import RequestPeer
from aql_mcp.endpoint.modern.listeners import Listener, Listeners
from aql_mcp.endpoint.modern.reply import Reply
from aql_mcp.endpoint.modern.request_state import RoundState
from aql_mcp.endpoint.modern.rounds import InputRound
from aql_mcp.endpoint.modern.subscription import TASK_STATUS, Change, SubscriptionFilter
from aql_mcp.endpoint.modern.task_methods import TaskMethods
from aql_mcp.endpoint.modern.tasks_extension import EXTENSION, StatusChange, TaskRunner
from aql_mcp.endpoint.notifier import Notifier
from aql_mcp.protocol.context import Context
from aql_mcp.protocol.primitives import RegisteredTool, Registry, Tool
from aql_mcp.store.base import Signal, Store
from tests.support.wait import eventually

pytestmark = pytest.mark.anyio
WITH_TASKS = {"elicitation": {}, "extensions": {EXTENSION: {}}}
QUESTION = {"method": "elicitation/create", "params": {"mode": "form", "message": "ok?", "requestedSchema": {}}}


async def _discard(message: Message) -> None:
    return None


def context(store: Store) -> Context:
    peer = RequestPeer(version="2026-07-28", info={}, caps=WITH_TASKS, log_level="off")
    reply = Reply(_discard, method="tools/call", inputs=InputRound(RoundState(), {}), keepalive_seconds=15)
    hub = SessionManager(store, idle_seconds=60, max_open=10, retry_after=1)
    return Context(request_id="r1", message_id=1, peer=peer, principal=None, outbound=reply, hub=hub)


def entry(tool: Tool) -> RegisteredTool:
    registry = Registry()
    registry.add_tool(tool)
    found = registry.tool(tool.name)
    assert found is not None
    return found


class Reports:
    """What the runner reported, in order."""

    def __init__(self) -> None:
        self.changes: list[StatusChange] = []
        self._new = anyio.Event()

    async def __call__(self, change: StatusChange) -> None:
        self.changes.append(change)
        self._new.set()

    async def until(self, status: str) -> list[str]:
        with anyio.fail_after(10):
            while not any(change.status == status for change in self.changes):
                self._new = anyio.Event()
                await self._new.wait()
        return [change.status for change in self.changes]


def runner_for(store: Store, reports: Reports) -> TaskRunner:
    hub = SessionManager(store, idle_seconds=60, max_open=10, retry_after=1)
    return TaskRunner(
        store.tasks, hub=hub, ttl_seconds=60, max_per_owner=5, max_result_bytes=100_000, on_status=reports
    )


async def test_each_status_a_task_reaches_is_reported_once_with_its_owner(store: Store) -> None:
    async def asking(arguments: dict[str, Any], ctx: Context) -> str:
        answers = await ctx.ask({"a": QUESTION})
        return str(answers["a"]["action"])

    reports = Reports()
    runner = runner_for(store, reports)
    ctx = context(store)
    created = await runner.launch(entry(Tool("asking", "asks", asking, task_support="optional")), {}, ctx)
    assert created is not None
    task_id = created["taskId"]

    assert await reports.until("input_required") == ["input_required"]
    answer = {"taskId": task_id, "inputResponses": {"a": {"action": "accept"}}}
    await TaskMethods(store.tasks, runner).update(answer, ctx)

    # `working` again may be read before the handler ends, or not at all: it finished first.
    assert (await reports.until("completed"))[-1] == "completed"
    assert [change.status for change in reports.changes] in (
        ["input_required", "working", "completed"],
        ["input_required", "completed"],
    )
    assert {(change.task_id, change.owner) for change in reports.changes} == {(task_id, "anonymous")}


async def test_a_cancellation_and_a_failure_are_reported(store: Store) -> None:
    async def forever(arguments: dict[str, Any], ctx: Context) -> str:
        await anyio.sleep_forever()
        return "never"

    async def crashing(arguments: dict[str, Any], ctx: Context) -> str:
        raise RuntimeError("boom")

    reports = Reports()
    runner = runner_for(store, reports)
    ctx = context(store)
    stopped = await runner.launch(entry(Tool("forever", "runs", forever, task_support="optional")), {}, ctx)
    assert stopped is not None
    await TaskMethods(store.tasks, runner).cancel({"taskId": stopped["taskId"]}, ctx)
    assert await reports.until("cancelled") == ["cancelled"]

    crashed = await runner.launch(entry(Tool("crashing", "fails", crashing, task_support="optional")), {}, ctx)
    assert crashed is not None
    assert await reports.until("failed") == ["cancelled", "failed"]
    assert reports.changes[-1].task_id == crashed["taskId"]


async def test_a_failing_report_never_touches_the_task(store: Store) -> None:
    async def broken(change: StatusChange) -> None:
        raise RuntimeError("the notifier is down")

    async def quick(arguments: dict[str, Any], ctx: Context) -> str:
        return "done"

    hub = SessionManager(store, idle_seconds=60, max_open=10, retry_after=1)
    runner = TaskRunner(
        store.tasks, hub=hub, ttl_seconds=60, max_per_owner=5, max_result_bytes=100_000, on_status=broken
    )
    created = await runner.launch(entry(Tool("quick", "task", quick, task_support="optional")), {}, context(store))
    assert created is not None
    await eventually(lambda: runner.running == 0, "the task did not end")
    record = await store.tasks.load_task(created["taskId"])
    assert record is not None
    assert record.status == "completed"
    assert record.result == {"content": [{"type": "text", "text": "done"}]}


def listening(listeners: Listeners, owner: str, task_ids: tuple[str, ...]) -> Listener:
    listener = Listener(owner=owner, subscription_id=3, wanted=SubscriptionFilter(task_ids=task_ids))
    listeners.admit(listener)
    return listener


async def test_a_status_change_reaches_only_the_owners_streams_that_asked_for_the_task(store: Store) -> None:
    listeners = Listeners(max_open=10, max_per_owner=10)
    sessions = SessionManager(store, idle_seconds=60, max_open=10, retry_after=1)
    notifier = Notifier(sessions=sessions, listeners=listeners, bus=store.bus)
    asked = listening(listeners, "alice", ("t1",))
    other_task = listening(listeners, "alice", ("t2",))
    other_owner = listening(listeners, "mallory", ("t1",))

    await notifier.task_status(StatusChange("t1", "alice", "completed"))
    # From another replica, through the bus: the same change, as the signal carries it.
    await notifier.on_signal(Signal("broadcast", target=TASK_STATUS, payload=b'{"taskId":"t2","owner":"alice"}'))

    with anyio.fail_after(5):
        assert await asked.next_changes(5) == [Change(TASK_STATUS, "t1", "alice")]
        assert await other_task.next_changes(5) == [Change(TASK_STATUS, "t2", "alice")]
    assert await other_owner.next_changes(0.1) == []
