"""Execution state changes in the audit trail on every engine: one `execution` record per
transition, the execution's id and its starter's digest on each (plugins/executions/audited.py;
docs/audit.md)."""

from __future__ import annotations

import time

import pytest

from aql_mcp.audit.verifier import verify
from aql_mcp.audit.writer import AuditTrail
from aql_mcp.builtin_sections import ExecutionSettings
from aql_mcp.operations.audit import AuditLog
from aql_mcp.operations.payload import Limits
from aql_mcp.plugins.executions.audited import AuditedExecutionStore
from aql_mcp.plugins.executions.store import ExecutionRecord
from aql_mcp.plugins.executions.worker import ExecutionWorker
from aql_mcp.plugins.records.store import Quota
from aql_mcp.protocol.task_mapping import TaskStatusReporter
from aql_mcp.store.base import Store
from tests.support.engines import Backend
from tests.support.wait import arrives, eventually

pytestmark = pytest.mark.anyio
QUOTA = Quota(100_000, 100_000_000)
LIMITS = Limits(1_000_000, 10_000, 32)
ALICE = "a1" * 8


def _record(
    execution_id: str, kind: str, principal: str | None = ALICE, session_id: str | None = None
) -> ExecutionRecord:
    now = time.time()
    return ExecutionRecord(
        execution_id,
        "alice",
        kind,
        "pending",
        now,
        now,
        session_id=session_id,
        params={"collection": "c"},
        principal=principal,
    )


async def _trail(store: Store, trail: AuditTrail, execution_id: str) -> list[tuple[str, str, str, str]]:
    await trail.drain()
    rows = await store.audit.records()
    return [(row.kind, row.operation, row.outcome, row.subject) for row in rows if row.resource_id == execution_id]


async def test_each_transition_of_an_execution_is_one_record_with_its_starter(store: Store) -> None:
    await store.records.create_collection("alice", "c", "", None, "now")
    trail = AuditTrail(store.audit)
    audited = AuditedExecutionStore(store.executions, AuditLog(trail))
    worker = ExecutionWorker(audited, store.records, ExecutionSettings(), lambda: QUOTA, LIMITS)  # type: ignore[arg-type]
    payload = b"".join(b'{"n": %d}\n' % i for i in range(5))
    assert await audited.create(_record("exec_1", "import"), payload, max_live_per_owner=5)
    started = await audited.start("exec_1", time.time())
    assert started is not None
    worker.launch(started)
    await eventually(lambda: worker.running == 0, "the import did not end")
    assert await _trail(store, trail, "exec_1") == [
        ("execution", "execute_import", "pending", ALICE),
        ("execution", "execute_import", "running", ALICE),
        ("execution", "execute_import", "completed", ALICE),
    ]
    assert await audited.create(_record("exec_2", "export", principal=None), None, max_live_per_owner=5)
    assert await audited.cancel("exec_2", "alice", time.time(), "stop") == "cancelled"
    assert await audited.cancel("exec_2", "alice", time.time(), "again") == "ended"  # no change, no record
    assert await _trail(store, trail, "exec_2") == [
        ("execution", "execute_export", "pending", "anonymous"),
        ("execution", "execute_export", "cancelled", "anonymous"),
    ]
    assert (await verify(store.audit)).ok


async def test_a_failed_execution_retried_is_recorded_running_again(store: Store) -> None:
    trail = AuditTrail(store.audit)
    audited = AuditedExecutionStore(store.executions, AuditLog(trail))
    assert await audited.create(_record("exec_3", "import"), b'{"n": 1}\n', max_live_per_owner=5)
    assert await audited.start("exec_3", time.time()) is not None
    error = {"code": "INTERNAL_ERROR", "message": "boom", "details": {}}
    assert await audited.transition("exec_3", "failed", time.time(), error=error)
    assert not await audited.transition("exec_3", "completed", time.time())  # forbidden: no record
    assert await audited.retry("exec_3", "alice", time.time()) is not None
    outcomes = [outcome for _, _, outcome, _ in await _trail(store, trail, "exec_3")]
    assert outcomes == ["pending", "running", "failed", "running"]


async def test_the_end_of_a_session_records_each_execution_it_cancels(store: Store) -> None:
    trail = AuditTrail(store.audit)
    audited = AuditedExecutionStore(store.executions, AuditLog(trail))
    for execution_id in ("exec_4", "exec_5", "exec_6"):
        assert await audited.create(_record(execution_id, "export", session_id="sess"), None, max_live_per_owner=5)
    assert await audited.cancel("exec_6", "alice", time.time(), "stop") == "cancelled"  # ended before
    assert await audited.cancel_session("sess", time.time()) == 2
    for execution_id, outcomes in (
        ("exec_4", ["pending", "cancelled"]),
        ("exec_5", ["pending", "cancelled"]),
        ("exec_6", ["pending", "cancelled"]),
    ):
        assert [outcome for _, _, outcome, _ in await _trail(store, trail, execution_id)] == outcomes
    assert await audited.cancel_session("sess", time.time()) == 0
    assert len(await store.audit.records()) == 6


class Told:
    """What the core's task status reporter was told (plugin API `TaskStatusReporter`), in order."""

    def __init__(self) -> None:
        self.changes: list[tuple[str, str]] = []

    async def __call__(self, task_id: str, owner: str) -> None:
        self.changes.append((task_id, owner))


async def test_each_change_of_an_executions_task_status_is_told_with_its_owner(store: Store) -> None:
    """An execution's task is `working` from its creation until it ends: each end is told, and a retry
    (working again); a start is not, nor anything of an execution started without a token."""
    told = Told()
    audited = AuditedExecutionStore(store.executions, AuditLog(AuditTrail(store.audit)))
    audited.task_status = TaskStatusReporter()
    audited.task_status.bind(told)
    assert await audited.create(_record("exec_7", "import"), b'{"n": 1}\n', max_live_per_owner=5)
    assert await audited.start("exec_7", time.time()) is not None
    assert told.changes == []
    error = {"code": "INTERNAL_ERROR", "message": "boom", "details": {}}
    assert await audited.transition("exec_7", "failed", time.time(), error=error)
    assert told.changes == [("exec_7", ALICE)]
    assert await audited.retry("exec_7", "alice", time.time()) is not None
    assert await audited.transition("exec_7", "completed", time.time())
    assert told.changes == [("exec_7", ALICE)] * 3

    assert await audited.create(_record("exec_8", "export"), None, max_live_per_owner=5)
    assert await audited.cancel("exec_8", "alice", time.time(), "stop") == "cancelled"
    assert await audited.cancel("exec_8", "alice", time.time(), "again") == "ended"  # no change
    assert await audited.create(_record("exec_9", "export", principal=None), None, max_live_per_owner=5)
    assert await audited.cancel("exec_9", "alice", time.time(), "stop") == "cancelled"
    assert told.changes == [("exec_7", ALICE)] * 3 + [("exec_8", ALICE)]


async def test_a_failing_report_leaves_the_execution_as_it_was_changed(store: Store) -> None:
    async def broken(task_id: str, owner: str) -> None:
        raise RuntimeError("the notifier is down")

    audited = AuditedExecutionStore(store.executions, AuditLog(AuditTrail(store.audit)))
    audited.task_status = TaskStatusReporter()
    audited.task_status.bind(broken)
    assert await audited.create(_record("exec_10", "export"), None, max_live_per_owner=5)
    assert await audited.cancel("exec_10", "alice", time.time(), "stop") == "cancelled"
    found = await audited.load("exec_10")
    assert found is not None
    assert found.status == "cancelled"


async def test_an_execution_a_takeover_ends_is_told_by_the_replica_that_took_it_over(backend: Backend) -> None:
    """Its replica was lost (its lease ran out on the database's clock) and it may not be resumed
    again (`max_takeovers` 0): the replica that ends it tells its task's end."""
    lost, taker = await backend.open(), await backend.open()
    told = Told()
    audited = AuditedExecutionStore(taker.executions, AuditLog(AuditTrail(taker.audit)))
    audited.task_status = TaskStatusReporter()
    audited.task_status.bind(told)
    assert await lost.executions.create(_record("exec_11", "import"), b'{"n": 1}\n', max_live_per_owner=5)
    assert await lost.executions.start("exec_11", time.time()) is not None
    assert await lost.executions.renew(0.3, time.time()) == 1

    async def ended() -> bool:
        taken = await audited.take_over(time.time() + 60, lease_seconds=30, max_takeovers=0)
        return bool(taken.ended)

    await arrives(ended, "the lease did not run out")
    assert told.changes == [("exec_11", ALICE)]
    found = await audited.load("exec_11")
    assert found is not None
    assert found.status == "failed"
