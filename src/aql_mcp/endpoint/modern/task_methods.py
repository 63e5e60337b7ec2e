"""The Tasks extension's methods: `tasks/get`, `tasks/update` and `tasks/cancel` (SEP-2663;
docs/eras.md, "Tasks"), served in the modern era only.

They read and write the task's row, on whichever replica they land; the replica running the task
(endpoint/modern/tasks_extension.py) learns from the row, and is woken at once when the request landed on it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from aql_mcp.endpoint.modern.request_state import RoundState
from aql_mcp.endpoint.modern.rounds import FIELD as RESPONSES_FIELD
from aql_mcp.endpoint.modern.rounds import InputRound
from aql_mcp.endpoint.modern.tasks_extension import EXTENSION, TaskRunner, declares_tasks, owner_of, task_fields
from aql_mcp.exceptions import InvalidParams, MissingClientExtension, WireError
from aql_mcp.protocol.context import Context
from aql_mcp.store.tasks import TaskRecord, TaskStore


def detailed(record: TaskRecord) -> dict[str, Any]:
    """`tasks/get`'s DetailedTask: the questions while it waits, the result or error once it ended."""
    out = task_fields(record)
    if record.status == "input_required":
        out["inputRequests"] = record.input_requests
    elif record.status == "completed" and record.result is not None:
        out["result"] = record.result
    elif record.status == "failed" and record.error is not None:
        out["error"] = record.error
    return out


class TaskMethods:
    """`tasks/get`, `tasks/update` and `tasks/cancel`, served in the modern era only. Each needs the
    extension declared in the request (-32021 otherwise) and a task of the caller's (-32602)."""

    def __init__(self, store: TaskStore, runner: TaskRunner, clock: Callable[[], float] = time.time) -> None:
        self._store = store
        self._runner = runner
        self._clock = clock

    def table(self) -> dict[str, Any]:
        return {"tasks/get": self.get, "tasks/update": self.update, "tasks/cancel": self.cancel}

    async def get(self, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
        return detailed(await self._task(params, ctx))

    async def update(self, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
        task_id = _task_id(params, ctx)
        record = await self._found(task_id, ctx)
        # The same rules as an MRTR retry's answers (endpoint/modern/rounds.py): a map of result objects, and an
        # answer to a pending question has the shape of what that question asks for.
        pending = {key: ["", str(q.get("method"))] for key, q in record.input_requests.items() if isinstance(q, dict)}
        InputRound.parse(params, RoundState(asked=pending))
        responses: dict[str, Any] = params.get(RESPONSES_FIELD, {})
        if await self._store.answer_task(task_id, owner_of(ctx), responses, self._clock()) == "unknown":
            raise _unknown()
        self._runner.wake(task_id)
        return {}

    async def cancel(self, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
        task_id = _task_id(params, ctx)
        if not await self._store.cancel_task(task_id, owner_of(ctx), self._clock()):
            raise _unknown()
        self._runner.wake(task_id)
        return {}

    async def _task(self, params: dict[str, Any], ctx: Context) -> TaskRecord:
        return await self._found(_task_id(params, ctx), ctx)

    async def _found(self, task_id: str, ctx: Context) -> TaskRecord:
        record = await self._store.get_task(task_id, owner_of(ctx), self._clock())
        if record is None:
            raise _unknown()
        return record


def _task_id(params: dict[str, Any], ctx: Context) -> str:
    if not declares_tasks(ctx):
        raise MissingClientExtension(EXTENSION)
    task_id = params.get("taskId")
    if not isinstance(task_id, str) or not task_id:
        raise InvalidParams(data={"field": "taskId", "reason": "required"})
    return task_id


def _unknown() -> WireError:
    # Another caller's task is not found either: ids are not a way to learn what others run.
    return InvalidParams("Invalid params: no such task", data={"field": "taskId", "reason": "unknown"})
