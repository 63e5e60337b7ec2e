"""The task runner and the task methods (endpoint/modern/tasks_extension.py) on a real store, on
every engine: when a call becomes a task, how a task asks, resumes, is cancelled, fails, and what a
stopping replica leaves.
The wire is pinned end to end in tests/test_tasks_e2e.py; here the runner's own contract."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

import anyio
import pytest
from starlette.types import Message

from aql_mcp.endpoint.legacy.sessions import SessionManager
from aql_mcp.endpoint.modern.endpoint import RequestPeer
from aql_mcp.endpoint.modern.reply import Reply
from aql_mcp.endpoint.modern.request_state import RoundState
from aql_mcp.endpoint.modern.rounds import InputRound
from aql_mcp.endpoint.modern.task_methods import TaskMethods
from aql_mcp.endpoint.modern.tasks_extension import EXTENSION, TaskRunner
from aql_mcp.exceptions import InvalidParams, MissingClientExtension, TaskLimitReached, ToolError
from aql_mcp.protocol.content import text
from aql_mcp.protocol.context import Context
from aql_mcp.protocol.primitives import RegisteredTool, Registry, Tool, ToolResult
from aql_mcp.store.base import Store
from aql_mcp.store.tasks import TaskRecord
from tests.support.wait import eventually

pytestmark = pytest.mark.anyio
WITH_TASKS = {"elicitation": {}, "extensions": {EXTENSION: {}}}
QUESTION = {"method": "elicitation/create", "params": {"mode": "form", "message": "ok?", "requestedSchema": {}}}


async def _discard(message: Message) -> None:
    return None


def context(store: Store, caps: dict[str, Any], version: str = "2026-07-28") -> Context:
    peer = RequestPeer(version=version, info={}, caps=caps, log_level="off")
    reply = Reply(_discard, method="tools/call", inputs=InputRound(RoundState(), {}), keepalive_seconds=15)
    hub = SessionManager(store, idle_seconds=60, max_open=10, retry_after=1)
    return Context(request_id="r1", message_id=1, peer=peer, principal=None, outbound=reply, hub=hub)


def runner_for(store: Store, *, ttl: int = 60, cap: int = 5) -> TaskRunner:
    hub = SessionManager(store, idle_seconds=60, max_open=10, retry_after=1)
    return TaskRunner(store.tasks, hub=hub, ttl_seconds=ttl, max_per_owner=cap, max_result_bytes=100_000)


def entry(tool: Tool) -> RegisteredTool:
    registry = Registry()
    registry.add_tool(tool)
    found = registry.tool(tool.name)
    assert found is not None
    return found


async def settled(store: Store, task_id: str, *statuses: str) -> TaskRecord:
    wanted = statuses or ("completed", "failed", "cancelled")
    seen: list[TaskRecord] = []

    async def poll() -> None:
        while True:
            record = await store.tasks.load_task(task_id)
            if record is not None and record.status in wanted:
                seen.append(record)
                return
            await anyio.sleep(0.02)

    with anyio.fail_after(10):
        await poll()
    return seen[0]


async def done(arguments: dict[str, Any], ctx: Context) -> str:
    return "done"


async def test_a_plain_tool_a_legacy_request_and_an_undeclared_optional_call_are_plain_calls(store: Store) -> None:
    runner = runner_for(store)
    plain = entry(Tool("plain", "no tasks", done))
    optional = entry(Tool("optional", "tasks if asked", done, task_support="optional"))
    required = entry(Tool("required", "tasks only", done, task_support="required"))
    assert await runner.launch(plain, {}, context(store, WITH_TASKS)) is None
    assert await runner.launch(optional, {}, context(store, {})) is None
    # The extension belongs to 2026-07-28: a legacy session declaring it still gets a plain call.
    assert await runner.launch(required, {}, context(store, WITH_TASKS, version="2025-11-25")) is None
    assert runner.running == 0


async def test_a_required_task_tool_from_a_modern_request_without_the_extension_is_refused(store: Store) -> None:
    required = entry(Tool("required", "tasks only", done, task_support="required"))
    with pytest.raises(MissingClientExtension) as refused:
        await runner_for(store).launch(required, {}, context(store, {"elicitation": {}}))
    assert refused.value.data == {"requiredCapabilities": {"extensions": {EXTENSION: {}}}}


async def test_a_task_is_stored_before_it_is_announced_and_completes_with_the_result(store: Store) -> None:
    runner = runner_for(store)
    quick = entry(Tool("quick", "task", done, task_support="optional"))
    created = await runner.launch(quick, {}, context(store, WITH_TASKS))
    assert created is not None
    assert created["resultType"] == "task"
    assert await store.tasks.get_task(created["taskId"], "anonymous", created_at(created)) is not None
    finished = await settled(store, created["taskId"])
    assert finished.status == "completed"
    assert finished.result == {"content": [{"type": "text", "text": "done"}]}
    await eventually(lambda: runner.running == 0, "the runner kept a finished task")


def created_at(created: dict[str, Any]) -> float:
    return datetime.fromisoformat(created["createdAt"]).timestamp()


async def test_a_question_parks_the_task_and_the_answers_resume_the_same_run(store: Store) -> None:
    runs: list[str] = []

    async def asking(arguments: dict[str, Any], ctx: Context) -> str:
        runs.append("run")
        answers = await ctx.ask({"a": QUESTION, "b": QUESTION})
        return f"{answers['a']['action']} {answers['b']['action']}"

    runner = runner_for(store)
    ctx = context(store, WITH_TASKS)
    created = await runner.launch(entry(Tool("asking", "asks", asking, task_support="optional")), {}, ctx)
    assert created is not None
    task_id = created["taskId"]
    parked = await settled(store, task_id, "input_required")
    assert set(parked.input_requests) == {"a", "b"}
    methods = TaskMethods(store.tasks, runner)
    await methods.update({"taskId": task_id, "inputResponses": {"a": {"action": "accept"}}}, ctx)
    await methods.update({"taskId": task_id, "inputResponses": {"b": {"action": "decline"}}}, ctx)
    finished = await settled(store, task_id)
    assert finished.result == {"content": [{"type": "text", "text": "accept decline"}]}
    assert runs == ["run"]


async def test_an_answer_counts_only_for_the_question_it_was_given_to(store: Store) -> None:
    """A key asked again with another question (a loop over files, say) is asked anew: the consent
    given for the first never stands for the second."""

    async def deleting(arguments: dict[str, Any], ctx: Context) -> str:
        said = []
        for name in ("alpha.txt", "beta.txt"):
            question = {**QUESTION, "params": {**QUESTION["params"], "message": f"Delete {name}?"}}
            said.append((await ctx.ask({"confirm": question}))["confirm"]["action"])
        return " ".join(said)

    runner = runner_for(store)
    ctx = context(store, WITH_TASKS)
    created = await runner.launch(entry(Tool("deleting", "asks twice", deleting, task_support="optional")), {}, ctx)
    assert created is not None
    methods = TaskMethods(store.tasks, runner)
    first = await settled(store, created["taskId"], "input_required")
    await methods.update({"taskId": created["taskId"], "inputResponses": {"confirm": {"action": "accept"}}}, ctx)

    async def asked_about_beta() -> TaskRecord:
        while True:
            record = await store.tasks.load_task(created["taskId"])
            assert record is not None
            if record.status == "input_required" and "beta" in str(record.input_requests):
                return record
            await anyio.sleep(0.02)

    with anyio.fail_after(10):
        second = await asked_about_beta()
    (key,) = second.input_requests
    assert key not in first.input_requests
    await methods.update({"taskId": created["taskId"], "inputResponses": {key: {"action": "decline"}}}, ctx)
    finished = await settled(store, created["taskId"])
    assert finished.result == {"content": [{"type": "text", "text": "accept decline"}]}


async def test_a_result_that_cannot_be_stored_fails_the_task_instead_of_leaving_it_working(store: Store) -> None:
    async def odd(arguments: dict[str, Any], ctx: Context) -> ToolResult:
        return ToolResult([text("priced")], structured={"amount": Decimal("1.5")})

    runner = runner_for(store)
    created = await runner.launch(
        entry(Tool("odd", "odd result", odd, task_support="optional")), {}, context(store, WITH_TASKS)
    )
    assert created is not None
    finished = await settled(store, created["taskId"])
    assert finished.status == "failed"
    assert finished.error is not None
    assert finished.error["code"] == -32603


async def test_an_answer_of_the_wrong_shape_is_refused_before_it_is_stored(store: Store) -> None:
    async def asking(arguments: dict[str, Any], ctx: Context) -> str:
        await ctx.ask({"a": QUESTION})
        return "answered"

    runner = runner_for(store)
    ctx = context(store, WITH_TASKS)
    created = await runner.launch(entry(Tool("asking", "asks", asking, task_support="optional")), {}, ctx)
    assert created is not None
    await settled(store, created["taskId"], "input_required")
    with pytest.raises(InvalidParams):
        await TaskMethods(store.tasks, runner).update(
            {"taskId": created["taskId"], "inputResponses": {"a": {"action": "perhaps"}}}, ctx
        )
    still = await store.tasks.load_task(created["taskId"])
    assert still is not None
    assert still.answers == {}
    await runner.close()


async def test_a_cancelled_task_stops_its_handler(store: Store) -> None:
    stopped = anyio.Event()

    async def forever(arguments: dict[str, Any], ctx: Context) -> str:
        try:
            await anyio.sleep_forever()
        finally:
            stopped.set()
        return "never"

    runner = runner_for(store)
    ctx = context(store, WITH_TASKS)
    created = await runner.launch(entry(Tool("forever", "runs", forever, task_support="optional")), {}, ctx)
    assert created is not None
    await TaskMethods(store.tasks, runner).cancel({"taskId": created["taskId"]}, ctx)
    with anyio.fail_after(10):
        await stopped.wait()
    assert (await settled(store, created["taskId"])).status == "cancelled"


async def test_closing_the_runner_fails_its_running_tasks_as_shut_down(store: Store) -> None:
    async def forever(arguments: dict[str, Any], ctx: Context) -> str:
        await anyio.sleep_forever()
        return "never"

    runner = runner_for(store)
    created = await runner.launch(
        entry(Tool("forever", "runs", forever, task_support="optional")), {}, context(store, WITH_TASKS)
    )
    assert created is not None
    await runner.close()
    failed = await store.tasks.load_task(created["taskId"])
    assert failed is not None
    assert failed.status == "failed"
    assert failed.error is not None
    assert failed.error["code"] == -32006
    assert failed.status_message == "shutdown"


async def test_a_tool_error_completes_and_a_crash_fails_without_internals(store: Store) -> None:
    async def refuses(arguments: dict[str, Any], ctx: Context) -> str:
        raise ToolError("not today")

    async def crashes(arguments: dict[str, Any], ctx: Context) -> str:
        raise RuntimeError("secret path /etc/x")

    runner = runner_for(store)
    ctx = context(store, WITH_TASKS)
    refused = await runner.launch(entry(Tool("refuses", "x", refuses, task_support="optional")), {}, ctx)
    crashed = await runner.launch(entry(Tool("crashes", "x", crashes, task_support="optional")), {}, ctx)
    assert refused is not None
    assert crashed is not None
    completed = await settled(store, refused["taskId"])
    assert completed.status == "completed"
    assert completed.result is not None
    assert completed.result["isError"] is True
    failed = await settled(store, crashed["taskId"])
    assert failed.status == "failed"
    assert failed.error is not None
    assert failed.error["code"] == -32603
    assert "secret" not in str(failed.error)


async def test_a_task_still_running_at_the_end_of_its_time_fails_with_a_timeout(store: Store) -> None:
    async def slow(arguments: dict[str, Any], ctx: Context) -> str:
        await anyio.sleep_forever()
        return "late"

    runner = runner_for(store, ttl=1)
    tool = entry(Tool("slow", "x", slow, task_support="optional"))
    created = await runner.launch(tool, {}, context(store, WITH_TASKS))
    assert created is not None
    failed = await settled(store, created["taskId"], "failed")
    assert failed.error is not None
    assert failed.error["code"] == -32004


async def test_a_caller_over_its_cap_is_refused_and_nothing_is_stored(store: Store) -> None:
    async def forever(arguments: dict[str, Any], ctx: Context) -> str:
        await anyio.sleep_forever()
        return "never"

    runner = runner_for(store, cap=1)
    tool = entry(Tool("forever", "runs", forever, task_support="optional"))
    ctx = context(store, WITH_TASKS)
    assert await runner.launch(tool, {}, ctx) is not None
    with pytest.raises(TaskLimitReached):
        await runner.launch(tool, {}, ctx)
    assert runner.running == 1
    await runner.close()
