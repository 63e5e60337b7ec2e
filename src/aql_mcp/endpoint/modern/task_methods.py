"""The Tasks extension's methods: `tasks/get`, `tasks/update` and `tasks/cancel` (SEP-2663;
docs/eras.md, "Tasks"), served in the modern era only.

They read and write the task's row, on whichever replica they land; the replica running the task
(endpoint/modern/tasks_extension.py) learns from the row, and is woken at once when the request landed on it.
An id a plugin's task mapper owns (protocol/task_mapping.py: the executions plugin's `exec_` ids) goes
to the mapper instead, whose own rows are the truth.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from aql_mcp.endpoint.modern.request_state import RoundState
from aql_mcp.endpoint.modern.rounds import FIELD as RESPONSES_FIELD
from aql_mcp.endpoint.modern.rounds import InputRound
from aql_mcp.endpoint.modern.tasks_extension import EXTENSION, TaskRunner, owner_of, task_fields
from aql_mcp.exceptions import InvalidParams, MissingClientExtension, WireError
from aql_mcp.protocol.context import Context
from aql_mcp.protocol.task_mapping import ModernTaskMapper, declares_tasks
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

    def __init__(
        self,
        store: TaskStore,
        runner: TaskRunner,
        clock: Callable[[], float] = time.time,
        *,
        mapper: ModernTaskMapper | None = None,
    ) -> None:
        self._store = store
        self._runner = runner
        self._clock = clock
        self._mapper = mapper

    def table(self) -> dict[str, Any]:
        return {"tasks/get": self.get, "tasks/update": self.update, "tasks/cancel": self.cancel}

    async def get(self, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
        task_id = _task_id(params, ctx)
        mapper = self._mapper_of(task_id)
        if mapper is not None:
            return await _mapped(mapper, task_id, ctx)
        return detailed(await self._found(task_id, ctx))

    async def update(self, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
        task_id = _task_id(params, ctx)
        mapper = self._mapper_of(task_id)
        if mapper is not None:
            # A mapped task never asks the client anything, so no key is outstanding: SEP-2663 ("Task
            # Update Requests") has the server ignore such responses and acknowledge.
            await _mapped(mapper, task_id, ctx)
            return {}
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
        mapper = self._mapper_of(task_id)
        if mapper is not None:
            if not await mapper.cancel(task_id, ctx):
                raise _unknown()
            return {}
        if not await self._store.cancel_task(task_id, owner_of(ctx), self._clock()):
            raise _unknown()
        self._runner.wake(task_id)
        return {}

    def _mapper_of(self, task_id: str) -> ModernTaskMapper | None:
        """The plugin's mapper when `task_id` is one of its ids, else None (a task of the core's table)."""
        return self._mapper if self._mapper is not None and self._mapper.owns(task_id) else None

    async def _found(self, task_id: str, ctx: Context) -> TaskRecord:
        record = await self._store.get_task(task_id, owner_of(ctx), self._clock())
        if record is None:
            raise _unknown()
        return record


async def _mapped(mapper: ModernTaskMapper, task_id: str, ctx: Context) -> dict[str, Any]:
    found = await mapper.get(task_id, ctx)
    if found is None:
        raise _unknown()
    return found


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
