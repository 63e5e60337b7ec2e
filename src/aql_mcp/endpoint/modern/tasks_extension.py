"""The Tasks extension (`io.modelcontextprotocol/tasks`, MCP 2026-07-28; docs/eras.md, "Tasks").

A tool registered with `task_support` and called by a modern request that declares the extension
in its `_meta` capabilities does not make the client wait: the call is answered at once with a
`CreateTaskResult` (`resultType: "task"`), and the handler runs on in the background of the replica
that took the call. The client polls `tasks/get`, answers questions with `tasks/update` and may
stop the work with `tasks/cancel`, on any replica: the task's row in the store is the truth
(store/tasks.py), so those methods (endpoint/modern/task_methods.py) only read and write it, and the replica
running the task reads it back to learn what they did: one batched poll of all its tasks (`_poll_forever`,
woken at once when the method landed on the same replica), which also renews their leases. A task
whose lease ran out (its replica died) is failed by whichever replica polls next, -32006 and retryable.

A handler asks the client exactly as it does in a plain call (`ctx.elicit`, `ctx.ask`): in a task
the question parks the task in `input_required` with the question stored, the handler waits, and
it resumes with the answers once `tasks/update` has brought them all. The handler therefore runs
once, unlike an MRTR round. A tool error is `completed` with `result.isError`; anything else that
stops the handler (a crash, a protocol error, the task's time running out, this replica shutting
down) is `failed` with a JSON-RPC `error`.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import structlog

from aql_mcp.auth.principal import principal_key
from aql_mcp.endpoint.modern.request_state import digest
from aql_mcp.endpoint.modern.task_poll import PARKED_POLL_SECONDS, REPLICA_LOST, LiveTask, TaskPoll
from aql_mcp.endpoint.statuses import wire_code
from aql_mcp.exceptions import (
    InternalError,
    MissingClientCapability,
    MissingClientExtension,
    ShuttingDown,
    StoreError,
    TaskLimitReached,
    ToolTimeout,
)
from aql_mcp.observability.telemetry import INTERNAL
from aql_mcp.protocol.context import Context, ResourceHub
from aql_mcp.protocol.primitives import RegisteredTool
from aql_mcp.protocol.result_limit import limit_result
from aql_mcp.protocol.task_mapping import TASKS_EXTENSION, declares_tasks
from aql_mcp.protocol.tools import run_tool
from aql_mcp.protocol.versions import MODERN_VERSIONS, Era
from aql_mcp.responses import error_object
from aql_mcp.store.tasks import TaskRecord, TaskStatus, TaskStore

EXTENSION = TASKS_EXTENSION
# How often a client is told to poll `tasks/get` (a hint; SEP-2663 `pollIntervalMs`).
POLL_INTERVAL_MS = 1000
# Retry-After of a caller over its cap of live tasks: a task usually ends within seconds.
LIMIT_RETRY_AFTER = 5
# A task the replica's shutdown stopped fails with -32006 and this retry hint (the call may be retried).
SHUTDOWN_RETRY_MS = 1000
# Ended tasks are kept, results and all, until they expire: a caller may hold this many times its
# cap of live tasks in all, so finished rows cannot pile up without bound.
STORED_PER_LIVE = 4
# A handler's time runs out this long before its task expires, so the failure can still be read.
FAILURE_VISIBLE_SECONDS = 60
# Writing a task's end retries a failing store, with growing pauses up to this, until it expires.
FINISH_RETRY_MAX_SECONDS = 5.0

log = structlog.get_logger("aql_mcp.tasks")


@dataclass(frozen=True, slots=True)
class StatusChange:
    """A task's status changed: what task status notifications (SEP-2663) are made from."""

    task_id: str
    owner: str
    status: TaskStatus
    status_message: str | None = None


# Told each status change of a task this replica runs (endpoint/notifier.py publishes it).
OnStatus = Callable[[StatusChange], Awaitable[None]]


def owner_of(ctx: Context) -> str:
    return principal_key(ctx.principal)


def timestamp(seconds: float) -> str:
    """ISO 8601 in UTC with milliseconds, as `createdAt` and `lastUpdatedAt` are sent."""
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def task_fields(record: TaskRecord) -> dict[str, Any]:
    """The `Task` fields (SEP-2663): no `requestState`, durations in integer milliseconds."""
    out: dict[str, Any] = {
        "taskId": record.id,
        "status": record.status,
        "createdAt": timestamp(record.created_at),
        "lastUpdatedAt": timestamp(record.updated_at),
        "ttlMs": record.ttl_ms,
        "pollIntervalMs": record.poll_ms,
    }
    if record.status_message:
        out["statusMessage"] = record.status_message
    return out


class TaskOutbound:
    """The `Outbound` of a task's handler: no stream to talk on, and questions park the task."""

    def __init__(self, live: LiveTask, runner: TaskRunner) -> None:
        self._live = live
        self._runner = runner

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        # Progress and log messages have no request stream to travel on once the call was answered,
        # and SEP-2663 keeps them off `subscriptions/listen`, which carries status changes only.
        return None

    async def ask(self, requests: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """An answer counts only for the question it was given to: a key asked again with another
        question is put to the client under a new key (keys are the server's to choose)."""
        live = self._live
        stored: dict[str, str] = {}
        missing: dict[str, dict[str, Any]] = {}
        for key, request in requests.items():
            question = digest(request)
            known = live.questions.get(key)
            if known is None or known[0] != question:
                known = (question, key if known is None else f"{key}.{len(live.answers) + len(live.questions)}")
                live.questions[key] = known
            stored[key] = known[1]
            if known[1] not in live.answers:
                missing[known[1]] = request
        if missing:
            live.waiting = missing
            live.answered.clear()
            await self._runner.parked(live, missing)
            await live.answered.wait()
        return {key: live.answers[stored[key]] for key in requests}

    def missing_capability(self, capability: str) -> Exception:
        return MissingClientCapability(capability)

    async def close_connection(self) -> None:
        return None


class TaskRunner:
    """Creates tasks for task-supporting tools and runs them on this replica (`ToolMethods` calls
    `launch`); `close` fails the tasks still running when the replica stops."""

    def __init__(
        self,
        store: TaskStore,
        *,
        hub: ResourceHub,
        ttl_seconds: int,
        max_per_owner: int,
        max_result_bytes: int,
        lease_seconds: float = 15.0,
        clock: Callable[[], float] = time.time,
        on_status: OnStatus | None = None,
    ) -> None:
        self._store = store
        self._on_status = on_status
        self._hub = hub
        self._ttl = ttl_seconds
        self._max_per_owner = max_per_owner
        self._max_result_bytes = max_result_bytes
        self._clock = clock
        self._live: dict[str, LiveTask] = {}
        self._poll = TaskPoll(
            store, self._live, lease_seconds=lease_seconds, clock=clock, report=self._report, lost=self._report_lost
        )

    def on_takeover(self, listener: Callable[[str], None]) -> None:
        """Call `listener(task_id)` for each task of a lost replica this replica failed."""
        self._poll.takeovers.append(listener)

    def start(self) -> None:
        """Start this replica's poll (idempotent; `launch` starts it too): it renews the leases of the
        tasks running here and fails the tasks of lost replicas, even while none runs here."""
        self._poll.start()

    @property
    def running(self) -> int:
        return len(self._live)

    async def launch(self, entry: RegisteredTool, arguments: dict[str, Any], ctx: Context) -> dict[str, Any] | None:
        """A `CreateTaskResult` once the task is stored (a `tasks/get` right after it finds it), or
        None when this call is a plain one (the tool supports no tasks, or the request cannot have one)."""
        tool = entry.tool
        if tool.task_support is None:
            return None
        if not declares_tasks(ctx):
            if tool.task_support == "required" and _modern(ctx):
                # SEP-2663 "Required Capabilities": it cannot be served without a task.
                raise MissingClientExtension(EXTENSION)
            return None
        if tool.before_task is not None:
            await tool.before_task(arguments, ctx)  # may end this attempt with input_required
        record = await self._create(tool.name, ctx)
        live = LiveTask(record.id, ctx.request_id, record.expires_at, owner=record.owner)
        task_ctx = Context(
            request_id=ctx.request_id,
            message_id=None,
            peer=ctx.peer,
            principal=ctx.principal,
            outbound=TaskOutbound(live, self),
            hub=self._hub,
            memo=dict(ctx.memo),
        )
        self._live[record.id] = live
        self.start()
        live.runner = asyncio.create_task(self._execute(live, entry, arguments, task_ctx))
        log.info("task_created", task_id=record.id, tool=tool.name)
        return {"resultType": "task", **task_fields(record)}

    def wake(self, task_id: str) -> None:
        """A request on this replica changed the task's row: let the poll look now."""
        if task_id in self._live:
            self._poll.wake()

    async def parked(self, live: LiveTask, requests: dict[str, Any]) -> None:
        """The task's handler asks: store the questions; the poll (woken now, so a task cancelled
        meanwhile is noticed at once) brings the answers."""
        await self._store.park_task(live.id, requests, self._clock())
        await self._report(live, "input_required", None)
        self._poll.wake()

    async def close(self) -> None:
        """Fail every task still running here (a stopped replica cannot finish them); the client
        may call again (-32006, `ShuttingDown`)."""
        await self._poll.stop()
        lives = list(self._live.values())
        for live in lives:
            live.stopping = True
            if live.runner is not None:
                live.runner.cancel()
        await asyncio.gather(*(live.runner for live in lives if live.runner is not None), return_exceptions=True)
        for live in lives:
            # Also a task whose handler had not started yet: cancelling it ran none of its code.
            if not live.finishing:
                await self._fail(live, ShuttingDown(retry_ms=SHUTDOWN_RETRY_MS), "shutdown")

    async def _create(self, tool: str, ctx: Context) -> TaskRecord:
        now = self._clock()
        record = TaskRecord(
            id=secrets.token_hex(16),
            owner=owner_of(ctx),
            tool=tool,
            status="working",
            created_at=now,
            updated_at=now,
            expires_at=now + self._ttl,
            ttl_ms=self._ttl * 1000,
            poll_ms=POLL_INTERVAL_MS,
        )
        admitted = await self._store.create_task(
            record,
            max_live_per_owner=self._max_per_owner,
            max_stored_per_owner=self._max_per_owner * STORED_PER_LIVE,
            now=now,
            lease_seconds=self._poll.lease_seconds,
        )
        if not admitted:
            raise TaskLimitReached(retry_after=LIMIT_RETRY_AFTER, data={"limit": self._max_per_owner})
        return record

    async def _execute(self, live: LiveTask, entry: RegisteredTool, arguments: dict[str, Any], ctx: Context) -> None:
        name = entry.tool.name
        run_seconds = max(self._ttl - FAILURE_VISIBLE_SECONDS, self._ttl / 2)
        try:
            async with asyncio.timeout(run_seconds):
                result, outcome = await run_tool(entry.tool.handler, arguments, ctx, name)
        except asyncio.CancelledError:
            # `tasks/cancel` ended it (the row already says `cancelled`), or `close` records the shutdown.
            log.info("task_stopped", task_id=live.id, reason="shutdown" if live.stopping else "cancelled")
        except TimeoutError:
            await self._fail(live, ToolTimeout(data={"timeoutSeconds": round(run_seconds)}))
        except Exception as exc:  # a protocol error (WireError) or a crash: the task failed
            await self._fail(live, exc)
        else:
            if outcome == INTERNAL:
                # `run_tool` logged the crash and made it a tool error; a task reports it as failed.
                await self._fail(live, InternalError())
            else:
                await self._finish(live, "completed", result=result)
        finally:
            self._live.pop(live.id, None)

    async def _fail(self, live: LiveTask, exc: BaseException, message: str | None = None) -> None:
        """`failed` with the JSON-RPC error `exc` answers as (a crash: -32603, nothing internal)."""
        wire, error = error_object(exc, live.request_id)
        error["code"] = wire_code(Era.MODERN, wire.code)
        await self._finish(live, "failed", error=error, message=message)

    async def _finish(
        self,
        live: LiveTask,
        status: TaskStatus,
        *,
        result: dict[str, Any] | None = None,
        error: dict[str, Any] | None = None,
        message: str | None = None,
    ) -> None:
        live.finishing = True
        pause = PARKED_POLL_SECONDS
        if result is not None:
            try:
                result = limit_result(result, self._max_result_bytes)
            except Exception:  # a value that is no JSON: caught below as a result that cannot be stored
                log.debug("task_result_not_measured", task_id=live.id)
        while True:
            try:
                await self._store.finish_task(
                    live.id, status, self._clock(), result=result, error=error, message=message
                )
                break
            except StoreError:
                # The work is done: keep trying to record it while the task lives, or the client
                # would poll `working` until it expires.
                if self._clock() + pause > live.expires_at:
                    log.warning("task_not_recorded", task_id=live.id, status=status)
                    return
                await asyncio.sleep(pause)
                pause = min(pause * 2, FINISH_RETRY_MAX_SECONDS)
            except Exception:
                if status == "failed":
                    log.exception("task_not_recorded", task_id=live.id, status=status)
                    return
                # The result cannot be stored (a value that is no JSON): the task failed instead.
                log.exception("task_result_not_stored", task_id=live.id)
                _, error = error_object(InternalError(), live.request_id)
                status, result, message = "failed", None, None
        log.info("task_finished", task_id=live.id, status=status)
        await self._report(live, status, message)

    async def _report_lost(self, task_id: str, owner: str) -> None:
        """A lost replica's task this replica failed: its own replica can no longer tell of it."""
        if self._on_status is None:
            return
        try:
            await self._on_status(StatusChange(task_id, owner, "failed", REPLICA_LOST))
        except Exception:
            log.exception("task_status_not_reported", task_id=task_id, status="failed")

    async def _report(self, live: LiveTask, status: TaskStatus, message: str | None) -> None:
        """Tell `on_status` of a status not reported yet; its failure never touches the task."""
        if self._on_status is None or status == live.reported:
            return
        live.reported = status
        try:
            await self._on_status(StatusChange(live.id, live.owner, status, message))
        except Exception:
            log.exception("task_status_not_reported", task_id=live.id, status=status)


def _modern(ctx: Context) -> bool:
    return ctx.peer is not None and ctx.peer.protocol_version in MODERN_VERSIONS
