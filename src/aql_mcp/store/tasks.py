"""Tasks of the `io.modelcontextprotocol/tasks` extension, kept in the store (docs/eras.md, "Tasks").

A task is created by the replica that runs its tool, but any replica may be asked about it: the
row is the truth, so `tasks/get`, `tasks/update` and `tasks/cancel` work wherever they land, and
the running replica learns of answers and cancellation by reading the row (endpoint/modern/tasks_extension.py).

Every method is one transaction. A task belongs to its caller (`owner`, the Principal digest):
every read and write a client drives names the owner, and another caller's task is simply not
found. A task is gone once `expires_at` has passed (its `ttlMs` after creation); expired rows are
deleted by the next `create`. Terminal statuses never change again, so a cancellation and a
completion racing each other leave whichever committed first.

A live task is leased to the replica running it (its row in `task_leases`): that replica renews the
leases of all its tasks with one statement (`poll_tasks`), and any replica fails a live task whose
lease ran out (`take_over_tasks`: its replica died). Lease ends are the database's clock on
PostgreSQL, so a replica whose own clock is off neither loses its leases nor takes others' early;
on SQLite one process is the only clock.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import orjson

TaskStatus = Literal["working", "input_required", "completed", "failed", "cancelled"]
LIVE: tuple[TaskStatus, ...] = ("working", "input_required")
TERMINAL: tuple[TaskStatus, ...] = ("completed", "failed", "cancelled")


@dataclass(slots=True)
class TaskRecord:
    """A task as stored. `input_requests` are the questions still unanswered (input_required);
    `answers` every answer the client gave, by key, for the running replica to take."""

    id: str
    owner: str
    tool: str
    status: TaskStatus
    created_at: float
    updated_at: float
    expires_at: float
    ttl_ms: int
    poll_ms: int
    status_message: str | None = None
    input_requests: dict[str, Any] = field(default_factory=dict)
    answers: dict[str, Any] = field(default_factory=dict)
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


Answered = Literal["unknown", "ignored", "stored"]


@dataclass(frozen=True, slots=True)
class TaskState:
    """What the running replica learns of one of its tasks in a poll: its status, and the answers
    given so far when it asked for them (a task waiting for input)."""

    status: TaskStatus
    answers: dict[str, Any] | None = None
    status_message: str | None = None


class TaskStore(Protocol):
    @property
    def replica(self) -> str:
        """This process's name in the `replica` column of the tasks it runs."""
        ...

    async def create_task(
        self,
        record: TaskRecord,
        *,
        max_live_per_owner: int,
        max_stored_per_owner: int,
        now: float,
        lease_seconds: float | None = None,
    ) -> bool:
        """Insert unless the owner already has `max_live_per_owner` live (working or input_required)
        tasks or `max_stored_per_owner` tasks in all (ended ones are kept, with their results, until
        they expire); counted and inserted atomically. Expired tasks are deleted first. With
        `lease_seconds` the task is leased to this replica for that long (database clock)."""
        ...

    async def poll_tasks(
        self, task_ids: Collection[str], *, answers_for: Collection[str], lease_seconds: float | None, now: float
    ) -> dict[str, TaskState]:
        """One statement for this replica's tasks `task_ids`: each one's status (and its answers if
        it is in `answers_for`); a task missing from the answer no longer exists. With
        `lease_seconds`, the leases of those still live and held by this replica are renewed too."""
        ...

    async def take_over_tasks(self, error: dict[str, Any], message: str, now: float) -> list[tuple[str, str]]:
        """Fail every live task whose lease ran out (database clock) with `error` and `message`: the
        replica running it stopped renewing it, so it died (or lost the store). Their ids and owners."""
        ...

    async def get_task(self, task_id: str, owner: str, now: float) -> TaskRecord | None:
        """The owner's unexpired task, or None."""
        ...

    async def load_task(self, task_id: str) -> TaskRecord | None:
        """The task whoever owns it: for the replica running it, never for a client's request."""
        ...

    async def park_task(self, task_id: str, requests: dict[str, Any], now: float) -> bool:
        """The running tool asks: `input_required` with these questions, unless the task ended."""
        ...

    async def answer_task(self, task_id: str, owner: str, responses: dict[str, Any], now: float) -> Answered:
        """`tasks/update`: store the answers to questions still pending and drop those questions;
        with none left the task is `working` again. Answers to anything not pending are ignored."""
        ...

    async def finish_task(
        self,
        task_id: str,
        status: TaskStatus,
        now: float,
        *,
        result: dict[str, Any] | None = None,
        error: dict[str, Any] | None = None,
        message: str | None = None,
    ) -> bool:
        """Move a live task to a terminal status; False if it had ended already."""
        ...

    async def cancel_task(self, task_id: str, owner: str, now: float) -> bool:
        """`tasks/cancel`: a live task becomes `cancelled`, a terminal one stays as it is; False
        only when the owner has no such task."""
        ...


def json_or_none(value: dict[str, Any] | None) -> bytes | None:
    return None if value is None else orjson.dumps(value)


def task_row(record: TaskRecord) -> tuple[Any, ...]:
    """A task as the engines store it, in the column order both use (JSON as bytes)."""
    return (
        record.id,
        record.owner,
        record.tool,
        record.status,
        record.created_at,
        record.updated_at,
        record.expires_at,
        record.ttl_ms,
        record.poll_ms,
        record.status_message,
        orjson.dumps(record.input_requests),
        orjson.dumps(record.answers),
        json_or_none(record.result),
        json_or_none(record.error),
    )


def task_record(row: Any) -> TaskRecord:
    """A stored row (that column order) back as a task."""
    return TaskRecord(
        id=row[0],
        owner=row[1],
        tool=row[2],
        status=row[3],
        created_at=row[4],
        updated_at=row[5],
        expires_at=row[6],
        ttl_ms=row[7],
        poll_ms=row[8],
        status_message=row[9],
        input_requests=orjson.loads(row[10]),
        answers=orjson.loads(row[11]),
        result=orjson.loads(row[12]) if row[12] is not None else None,
        error=orjson.loads(row[13]) if row[13] is not None else None,
    )
