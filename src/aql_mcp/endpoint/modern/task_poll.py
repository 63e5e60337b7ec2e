"""One replica's poll of the tasks it runs, and the leases that say it still runs them (docs/eras.md, "Tasks").

Every live task row names the replica running it and when its lease ends (database clock,
store/tasks.py). The replica polls all its tasks with one statement: every `WORKING_POLL_SECONDS`
all of them, renewing their leases every `lease / RENEWALS_PER_LEASE`; in between, every
`PARKED_POLL_SECONDS`, only those waiting for answers; at once when a request on this replica
changed one (`wake`). A status that ended (a `tasks/cancel` anywhere, or a takeover) stops the
handler; answers wake the question it waits on.

After each renewal the replica also fails the live tasks whose lease ran out, on any replica: the
replica running them stopped renewing, so it died or lost the store. A generic handler cannot be
resumed elsewhere, so the task fails with -32006 (retryable, `statusMessage: "replica_lost"`)
instead of staying `working` until it expires.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import structlog

from aql_mcp.endpoint.statuses import wire_code
from aql_mcp.exceptions import ReplicaLost, StoreError
from aql_mcp.protocol.versions import Era
from aql_mcp.responses import error_object
from aql_mcp.store.tasks import TERMINAL, TaskStatus, TaskStore

# How often the replica polls its tasks' rows (one statement for all of them): those waiting for
# answers soon, all of them less often (only a cancellation can come then).
PARKED_POLL_SECONDS = 0.2
WORKING_POLL_SECONDS = 1.0
# A lease is renewed this many times within its length, so a failed renewal (a store hiccup) does
# not lose it.
RENEWALS_PER_LEASE = 3
# The `statusMessage` of a task failed because the replica running it was lost, and the retry hint.
REPLICA_LOST = "replica_lost"
RETRY_MS = 1000

log = structlog.get_logger("aql_mcp.tasks")


@dataclass(slots=True, eq=False)
class LiveTask:
    """A task running on this replica: its handler, and the questions it waits on."""

    id: str
    request_id: str
    expires_at: float
    owner: str = ""
    # The status last reported to `on_status`: a `CreateTaskResult` says `working`.
    reported: TaskStatus = "working"
    runner: asyncio.Task[None] | None = None
    answered: asyncio.Event = field(default_factory=asyncio.Event)
    waiting: dict[str, Any] = field(default_factory=dict)
    answers: dict[str, Any] = field(default_factory=dict)
    # The handler's key -> (digest of the question, key it is stored and answered under).
    questions: dict[str, tuple[str, str]] = field(default_factory=dict)
    finishing: bool = False
    stopping: bool = False


def replica_lost_error() -> dict[str, Any]:
    """The JSON-RPC `error` of a task whose replica was lost (no request id: that request was
    answered long ago, elsewhere)."""
    _, error = error_object(ReplicaLost(retry_ms=RETRY_MS), "")
    error["code"] = wire_code(Era.MODERN, error["code"])
    del error["data"]["requestId"]
    return error


class TaskPoll:
    """The poll loop over `live` (the runner's tasks, by id). `report(live, status, message)` hears
    of each status the poll finds; `lost(task_id, owner)` and each of `takeovers(task_id)` of each
    lost replica's task it failed."""

    def __init__(
        self,
        store: TaskStore,
        live: dict[str, LiveTask],
        *,
        lease_seconds: float,
        clock: Callable[[], float],
        report: Callable[[LiveTask, TaskStatus, str | None], Awaitable[None]],
        lost: Callable[[str, str], Awaitable[None]],
    ) -> None:
        self._store = store
        self._live = live
        self.lease_seconds = lease_seconds
        self._clock = clock
        self._report = report
        self._lost = lost
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.takeovers: list[Callable[[str], None]] = []

    def start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._forever(), name="task-poll")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    def wake(self) -> None:
        self._wakeup.set()

    async def _forever(self) -> None:
        renew_every = self.lease_seconds / RENEWALS_PER_LEASE
        next_renewal = next_full = 0.0
        while True:
            parked = any(live.waiting for live in self._live.values())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wakeup.wait(), PARKED_POLL_SECONDS if parked else WORKING_POLL_SECONDS)
            woken, tick = self._wakeup.is_set(), time.monotonic()
            self._wakeup.clear()
            renew = tick >= next_renewal
            full = renew or woken or tick >= next_full
            try:
                await self._poll(full=full, renew=renew)
                if renew:
                    next_renewal = tick + renew_every
                    await self._take_over()
            except StoreError:
                continue  # logged by the engine; the next turn tries again
            except Exception:
                log.exception("task_poll_failed")
                continue
            if full:
                next_full = tick + WORKING_POLL_SECONDS

    async def _poll(self, *, full: bool, renew: bool) -> None:
        lives = [live for live in self._live.values() if not live.finishing and (full or live.waiting)]
        if not lives:
            return
        states = await self._store.poll_tasks(
            [live.id for live in lives],
            answers_for=[live.id for live in lives if live.waiting],
            lease_seconds=self.lease_seconds if renew else None,
            now=self._clock(),
        )
        for live in lives:
            state = states.get(live.id)
            if live.finishing:
                continue
            if state is not None:
                # What `tasks/update` or `tasks/cancel` (on any replica) or a takeover set.
                await self._report(live, state.status, state.status_message)
            if state is None or state.status in TERMINAL:
                if live.runner is not None:
                    live.runner.cancel()
            elif live.waiting and state.answers is not None and all(key in state.answers for key in live.waiting):
                live.answers.update({key: state.answers[key] for key in live.waiting})
                live.waiting = {}
                live.answered.set()

    async def _take_over(self) -> None:
        taken = await self._store.take_over_tasks(replica_lost_error(), REPLICA_LOST, self._clock())
        for task_id, owner in taken:
            log.warning("task_taken_over", task_id=task_id)
            await self._lost(task_id, owner)
            for listener in self.takeovers:
                listener(task_id)
