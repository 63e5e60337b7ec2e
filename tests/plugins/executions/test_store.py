"""The `ExecutionStore` contract on every engine: owners, the cap on live executions, the §8.4.2
transitions and no other, atomic import batches, session end, orphans of a dead replica, retention
(docs/executions.md)."""

from __future__ import annotations

import itertools
import sqlite3

import asyncpg
import pytest

from aql_mcp.plugins.executions.store import (
    ABANDONED,
    EXPORTING,
    IMPORTING,
    STATUSES,
    TRANSITIONS,
    Batch,
    ExecutionRecord,
    ExecutionStatus,
    Progress,
    RetainedBytesExceeded,
)
from aql_mcp.plugins.records.store import NewRecord, Quota, QuotaExceeded
from aql_mcp.store.base import Store
from aql_mcp.store.factory import SQLITE_FILE
from tests.support.engines import Backend

pytestmark = pytest.mark.anyio
NOW = 1_000_000.0
QUOTA = Quota(1000, 1_000_000)


def _execution(execution_id: str, owner: str = "alice", *, session: str | None = None) -> ExecutionRecord:
    return ExecutionRecord(
        id=execution_id,
        owner=owner,
        kind="import",
        status="pending",
        created_at=NOW,
        updated_at=NOW,
        session_id=session,
        params={"collection": "c"},
    )


def _batch(start: int, count: int, *, rejected: int = 0, quota: Quota = QUOTA) -> Batch:
    return Batch(
        tenant="alice",
        collection="c",
        records=[NewRecord("c", f"rec_{start + i:020x}", {"n": start + i}, "e", "now") for i in range(count)],
        rejected=[{"row": start + count + i + 1, "reason": "not a JSON object"} for i in range(rejected)],
        done=start + count + rejected,
        total=100,
        quota=quota,
        report_cap=3,
    )


async def _in_status(store: Store, execution_id: str, status: ExecutionStatus) -> None:
    """Drive a new execution into `status` through allowed transitions only."""
    executions = store.executions
    assert await executions.create(_execution(execution_id), b"payload", max_live_per_owner=100)
    if status == "pending":
        return
    if status == "cancelled":
        assert await executions.transition(execution_id, "cancelled", NOW)
        return
    assert await executions.start(execution_id, NOW)
    if status != "running":
        assert await executions.transition(execution_id, status, NOW, error={"code": "X", "message": "x"})


async def test_an_execution_is_found_by_its_owner_only(store: Store) -> None:
    executions = store.executions
    assert await executions.create(_execution("e1"), None, max_live_per_owner=5)
    found = await executions.get("e1", "alice")
    assert found is not None
    assert (found.status, found.kind, found.params) == ("pending", "import", {"collection": "c"})
    assert await executions.get("e1", "mallory") is None
    assert await executions.cancel("e1", "mallory", NOW, "no") == "unknown"
    assert not await executions.retry("e1", "mallory", NOW)
    assert [r.id for r in await executions.list_executions("alice", status=None, limit=10)] == ["e1"]
    assert await executions.list_executions("mallory", status=None, limit=10) == []


async def test_live_executions_per_owner_are_capped_and_an_ended_one_frees_its_slot(store: Store) -> None:
    executions = store.executions
    assert await executions.create(_execution("a1"), None, max_live_per_owner=2)
    assert await executions.create(_execution("a2"), None, max_live_per_owner=2)
    assert not await executions.create(_execution("a3"), None, max_live_per_owner=2)
    assert await executions.create(_execution("b1", owner="bob"), None, max_live_per_owner=2)
    assert await executions.cancel("a1", "alice", NOW, "stop") == "cancelled"
    assert await executions.create(_execution("a3"), None, max_live_per_owner=2)


@pytest.mark.parametrize(("source", "target"), list(itertools.product(STATUSES, STATUSES)))
async def test_only_the_section_8_4_2_transitions_change_an_execution(
    store: Store, source: ExecutionStatus, target: ExecutionStatus
) -> None:
    """MCP-AQL §8.4.2: every pair of states is tried; only the six listed transitions commit."""
    await _in_status(store, "x", source)
    if target == "running" and source == "pending":
        changed = await store.executions.start("x", NOW + 1) is not None
    elif target == "running" and source == "failed":
        changed = await store.executions.retry("x", "alice", NOW + 1) is not None
    else:
        changed = await store.executions.transition("x", target, NOW + 1)
    assert changed == ((source, target) in TRANSITIONS)
    found = await store.executions.load("x")
    assert found is not None
    assert found.status == (target if changed else source)


async def test_a_terminal_execution_is_not_cancelled_and_a_pending_one_is(store: Store) -> None:
    executions = store.executions
    await _in_status(store, "done", "completed")
    assert await executions.cancel("done", "alice", NOW, "late") == "ended"
    assert (await executions.load("done")).status == "completed"  # type: ignore[union-attr]
    await _in_status(store, "waiting", "pending")
    assert await executions.cancel("waiting", "alice", NOW, "early") == "cancelled"
    cancelled = await executions.load("waiting")
    assert cancelled is not None
    assert (cancelled.status, cancelled.finished_at) == ("cancelled", NOW)
    assert await executions.payload("waiting") is None


async def test_an_import_batch_writes_records_progress_and_capped_report_together(store: Store) -> None:
    await store.records.create_collection("alice", "c", "", None, "now")
    await _in_status(store, "imp", "running")
    executions = store.executions
    assert await executions.import_batch("imp", _batch(0, 10, rejected=2), NOW, attempt=1) == "written"
    assert await executions.import_batch("imp", _batch(12, 5, rejected=2), NOW, attempt=1) == "written"
    found = await executions.load("imp")
    assert found is not None
    assert (found.progress.current, found.progress.total, found.rejected) == (19, 100, 4)
    assert len(found.report) == 3  # report_cap
    assert found.report[0] == {"row": 11, "reason": "not a JSON object"}
    assert (await store.records.usage("alice"))[0] == 15
    collection = await store.records.get_collection("alice", "c")
    assert collection is not None
    assert collection.record_count == 15


async def test_a_batch_after_a_cancellation_writes_nothing(store: Store) -> None:
    await store.records.create_collection("alice", "c", "", None, "now")
    await _in_status(store, "imp", "running")
    executions = store.executions
    assert await executions.import_batch("imp", _batch(0, 10), NOW, attempt=1) == "written"
    assert await executions.cancel("imp", "alice", NOW, "stop") == "cancelled"
    assert await executions.import_batch("imp", _batch(10, 10), NOW, attempt=1) == "stopped"
    found = await executions.load("imp")
    assert found is not None
    assert (found.status, found.progress.current) == ("cancelled", 10)
    assert (await store.records.usage("alice"))[0] == 10


async def test_a_batch_over_the_record_quota_writes_nothing_at_all(store: Store) -> None:
    await store.records.create_collection("alice", "c", "", None, "now")
    await _in_status(store, "imp", "running")
    with pytest.raises(QuotaExceeded):
        await store.executions.import_batch("imp", _batch(0, 10, quota=Quota(5, 1_000_000)), NOW, attempt=1)
    found = await store.executions.load("imp")
    assert found is not None
    assert (found.status, found.progress.current) == ("running", 0)
    assert (await store.records.usage("alice"))[0] == 0


async def test_create_records_adds_all_or_none_within_the_quota(store: Store) -> None:
    records = store.records
    await records.create_collection("alice", "c", "", None, "now")
    batch = [NewRecord("c", f"rec_{i:020x}", {"n": i}, "e", "now") for i in range(4)]
    assert await records.create_records("alice", "c", batch, QUOTA) == 4
    with pytest.raises(QuotaExceeded):
        await records.create_records("alice", "c", batch, Quota(6, 1_000_000))
    assert (await records.usage("alice"))[0] == 4


async def test_a_session_ending_cancels_its_live_executions_only(store: Store) -> None:
    """MCP-AQL §2.3.3: in-progress executions are session-scoped."""
    executions = store.executions
    assert await executions.create(_execution("s1", session="sess"), None, max_live_per_owner=9)
    assert await executions.create(_execution("s2", session="sess"), None, max_live_per_owner=9)
    assert await executions.start("s2", NOW)
    assert await executions.create(_execution("other", session="other"), None, max_live_per_owner=9)
    assert await executions.cancel_session("sess", NOW) == 2
    statuses = {r.id: r.status for r in await executions.list_executions("alice", status=None, limit=10)}
    assert statuses == {"s1": "cancelled", "s2": "cancelled", "other": "pending"}


async def test_what_a_gone_replica_left_running_fails_and_pending_is_cancelled(backend: Backend) -> None:
    first = await backend.open()
    assert await first.executions.create(_execution("run"), b"p", max_live_per_owner=9)
    assert await first.executions.start("run", NOW)
    assert await first.executions.create(_execution("wait"), b"p", max_live_per_owner=9)
    await first.close()
    backend.opened.remove(first)
    # A later run of the service (another replica name) recovers what the first one left.
    second = await backend.open()
    assert sorted(await second.executions.recover(NOW + 100, 15.0)) == ["run", "wait"]
    run, wait = await second.executions.load("run"), await second.executions.load("wait")
    assert run is not None
    assert wait is not None
    assert run.status == "failed"
    assert run.error is not None
    assert run.error["details"]["reason"] == "replica_stopped"
    assert wait.status == "cancelled"
    # The failed import may be retried: its payload was kept.
    assert await second.executions.payload("run") == b"p"
    assert await second.executions.retry("run", "alice", NOW + 101)
    assert await second.executions.recover(NOW + 102, 15.0) == []


async def test_ended_executions_are_purged_after_the_retention_with_their_output(store: Store) -> None:
    executions = store.executions
    await _in_status(store, "old", "running")
    assert await executions.store_part("old", 0, b'{"a":1}\n', attempt=1)
    assert await executions.transition("old", "completed", NOW, attempt=1)
    assert await executions.output_part("old", "alice", 0) == b'{"a":1}\n'
    assert await executions.output_part("old", "mallory", 0) is None
    await _in_status(store, "live", "running")
    assert await executions.purge(NOW + 1) == 1
    assert await executions.load("old") is None
    assert await executions.load("live") is not None


async def test_progress_is_recorded_only_while_running(store: Store) -> None:
    await _in_status(store, "exp", "running")
    assert await store.executions.set_progress("exp", Progress(5, 10, "half"), NOW, attempt=1)
    assert await store.executions.transition("exp", "cancelled", NOW)
    assert not await store.executions.set_progress("exp", Progress(6, 10), NOW, attempt=1)
    found = await store.executions.load("exp")
    assert found is not None
    assert found.progress == Progress(5, 10, "half")


async def test_a_new_execution_names_its_replica_and_no_live_replica_recovers_it(backend: Backend) -> None:
    """A pending row is this replica's from creation: neither its own sweep nor (on PostgreSQL)
    another live replica's takes it for one left by a replica that is gone."""
    first = await backend.open()
    assert await first.executions.create(_execution("fresh"), b"p", max_live_per_owner=9)
    found = await first.executions.load("fresh")
    assert found is not None
    assert found.replica == first.executions.replica
    assert await first.executions.recover(NOW + 100, 15.0) == []
    if backend.engine == "postgres":
        await first.bus.heartbeat(NOW + 95)  # the first replica is alive
        second = await backend.open()
        assert await second.executions.recover(NOW + 100, 15.0) == []
    started = await first.executions.start("fresh", NOW + 101)
    assert started is not None
    assert (started.status, started.attempts) == ("running", 1)


async def test_a_superseded_worker_writes_nothing_once_another_replica_retried_its_execution(
    backend: Backend,
) -> None:
    """The lease: a worker's batch, progress, output and final transition hold only while its
    replica still runs the attempt it started."""
    first, second = await backend.open(), await backend.open()
    await first.records.create_collection("alice", "c", "", None, "now")
    assert await first.executions.create(_execution("imp"), b"p", max_live_per_owner=9)
    old = await first.executions.start("imp", NOW)
    assert old is not None
    # Another replica took the first for gone: failed it, and a retry runs it there now.
    assert await second.executions.transition("imp", "failed", NOW + 1, error={"code": "X", "message": "x"})
    new = await second.executions.retry("imp", "alice", NOW + 2)
    assert new is not None
    assert new.attempts == old.attempts + 1
    assert await first.executions.import_batch("imp", _batch(0, 10), NOW + 3, attempt=old.attempts) == "stopped"
    assert not await first.executions.set_progress("imp", Progress(50, 100), NOW + 3, attempt=old.attempts)
    assert not await first.executions.store_part("imp", 0, b"x", attempt=old.attempts)
    assert not await first.executions.clear_output("imp", attempt=old.attempts)
    assert not await first.executions.transition("imp", "completed", NOW + 3, attempt=old.attempts)
    assert (await first.records.usage("alice"))[0] == 0
    # The current lease holder writes.
    assert await second.executions.import_batch("imp", _batch(0, 10), NOW + 4, attempt=new.attempts) == "written"
    assert await second.executions.transition("imp", "completed", NOW + 5, attempt=new.attempts)
    done = await second.executions.load("imp")
    assert done is not None
    assert (done.status, done.progress.current) == ("completed", 10)


async def test_a_running_execution_of_this_replica_with_no_worker_fails_and_one_with_a_worker_stays(
    store: Store,
) -> None:
    executions = store.executions
    await _in_status(store, "lost", "running")
    await _in_status(store, "kept", "running")
    assert await executions.fail_abandoned({"kept"}, NOW, NOW + 10) == []  # unchanged since before: too new
    assert await executions.fail_abandoned({"kept"}, NOW + 1, NOW + 10) == ["lost"]
    lost, kept = await executions.load("lost"), await executions.load("kept")
    assert lost is not None
    assert kept is not None
    assert (lost.status, kept.status) == ("failed", "running")
    assert lost.error is not None
    assert lost.error["details"]["reason"] == "worker_lost"
    assert await executions.payload("lost") == b"payload"  # kept for retry_execution
    # A pending one its replica never started (the start met a store error) is cancelled.
    await _in_status(store, "unstarted", "pending")
    assert await executions.fail_abandoned({"kept"}, NOW + 1, NOW + 10) == ["unstarted"]
    unstarted = await executions.load("unstarted")
    assert unstarted is not None
    assert unstarted.status == "cancelled"


async def test_an_owners_kept_payloads_and_outputs_are_capped_at_creation(store: Store) -> None:
    executions = store.executions
    assert await executions.create(_execution("a1"), b"x" * 600, max_live_per_owner=9, max_retained_bytes=1000)
    with pytest.raises(RetainedBytesExceeded) as refused:
        await executions.create(_execution("a2"), b"x" * 600, max_live_per_owner=9, max_retained_bytes=1000)
    assert (refused.value.current, refused.value.limit) == (600, 1000)
    assert await executions.load("a2") is None
    # Another owner's bytes are its own; a cancelled import drops its payload and frees them.
    assert await executions.create(
        _execution("b1", owner="bob"), b"x" * 600, max_live_per_owner=9, max_retained_bytes=1000
    )
    assert await executions.cancel("a1", "alice", NOW, "stop") == "cancelled"
    assert await executions.create(_execution("a3"), b"x" * 1000, max_live_per_owner=9, max_retained_bytes=1000)


async def test_a_principals_executions_page_by_key_with_no_repeat_or_skip_under_inserts(store: Store) -> None:
    """tasks/list's keyset: newest first by (created_at, id); an execution created between two
    pages shifts nothing."""
    executions = store.executions

    async def add(execution_id: str, at: float, principal: str = "p1") -> None:
        record = _execution(execution_id)
        record.created_at, record.principal = at, principal
        assert await executions.create(record, None, max_live_per_owner=100)

    for index in range(5):
        await add(f"e{index}", NOW + (index // 2))  # ties on created_at are ordered by id
    await add("theirs", NOW + 1, principal="p2")
    first = await executions.list_executions("alice", status=None, limit=2, principal="p1")
    assert [r.id for r in first] == ["e4", "e3"]
    await add("newer", NOW + 9)
    second = await executions.list_executions(
        "alice", status=None, limit=2, principal="p1", before=(first[-1].created_at, first[-1].id)
    )
    third = await executions.list_executions(
        "alice", status=None, limit=2, principal="p1", before=(second[-1].created_at, second[-1].id)
    )
    assert [r.id for r in second + third] == ["e2", "e1", "e0"]
    assert {r.principal for r in first + second + third} == {"p1"}


async def test_an_exports_parts_are_kept_in_order_fenced_by_the_lease_and_read_once_completed(store: Store) -> None:
    executions = store.executions
    await _in_status(store, "exp", "running")
    assert await executions.store_part("exp", 0, b"a\n", attempt=1)
    assert await executions.store_part("exp", 1, b"b\n", attempt=1)
    assert await executions.store_part("exp", 1, b"b\n", attempt=1)  # a repeat writes it again, unchanged
    assert await executions.output_part("exp", "alice", 0) is None  # not completed yet
    assert not await executions.store_part("exp", 2, b"c\n", attempt=2)  # another lease
    assert await executions.transition("exp", "completed", NOW, attempt=1)
    assert [await executions.output_part("exp", "alice", n) for n in range(3)] == [b"a\n", b"b\n", None]
    assert await executions.output_part("exp", "mallory", 0) is None
    assert not await executions.store_part("exp", 2, b"c\n", attempt=1)  # not running any more


async def test_a_restarted_export_clears_the_parts_of_its_earlier_attempt(store: Store) -> None:
    executions = store.executions
    await _in_status(store, "exp", "running")
    assert await executions.store_part("exp", 5, b"stale\n", attempt=1)
    assert await executions.clear_output("exp", attempt=1)
    assert await executions.store_part("exp", 0, b"fresh\n", attempt=1)
    assert await executions.transition("exp", "completed", NOW, attempt=1)
    assert await executions.output_part("exp", "alice", 5) is None
    assert await executions.output_part("exp", "alice", 0) == b"fresh\n"


async def test_parts_count_in_the_owners_kept_bytes_and_are_purged_with_their_execution(store: Store) -> None:
    executions = store.executions
    await _in_status(store, "exp", "running")
    assert await executions.store_part("exp", 0, b"x" * 700, attempt=1)
    assert await executions.transition("exp", "completed", NOW, attempt=1)
    with pytest.raises(RetainedBytesExceeded) as refused:
        await executions.create(_execution("next"), b"x" * 400, max_live_per_owner=9, max_retained_bytes=1000)
    assert refused.value.current == 700  # the payload went with the completion
    assert await executions.purge(NOW + 1) == 1
    assert await executions.create(_execution("next"), b"x" * 900, max_live_per_owner=9, max_retained_bytes=1000)


async def test_an_export_kept_whole_before_parts_existed_reads_as_its_part_0(backend: Backend) -> None:
    """A store upgraded in place: the release before parts kept the NDJSON in `executions.output`."""
    store = await backend.open()
    await _in_status(store, "old", "running")
    assert await store.executions.transition("old", "completed", NOW, attempt=1)
    if backend.engine == "sqlite":
        with sqlite3.connect(backend.path / SQLITE_FILE) as db:
            db.execute("UPDATE executions SET output = ? WHERE id = 'old'", (b'{"a":1}\n',))
    else:
        outsider = await asyncpg.connect(backend.url)
        await outsider.execute("UPDATE executions SET output = $1 WHERE id = 'old'", b'{"a":1}\n')
        await outsider.close()
    assert await store.executions.output_part("old", "alice", 0) == b'{"a":1}\n'
    assert await store.executions.output_part("old", "alice", 1) is None


async def test_a_repeated_import_batch_that_already_committed_writes_nothing_again(store: Store) -> None:
    """The worker retries a batch whose commit's answer was lost: the row already counts it."""
    await store.records.create_collection("alice", "c", "", None, "now")
    await _in_status(store, "imp", "running")
    assert await store.executions.import_batch("imp", _batch(0, 10), NOW, attempt=1) == "written"
    assert await store.executions.import_batch("imp", _batch(0, 10), NOW, attempt=1) == "written"
    assert (await store.records.usage("alice"))[0] == 10
    assert await store.executions.import_batch("imp", _batch(10, 5), NOW, attempt=1) == "written"
    assert (await store.records.usage("alice"))[0] == 15


async def test_the_progress_message_says_what_runs_and_why_it_failed(backend: Backend) -> None:
    """Issue 22: the `pending` of an execution's creation does not outlive it: running, its message
    says what it does; failed, why (its error's message), on a transition, a lost worker and a gone replica."""
    first = await backend.open()
    executions = first.executions
    record = _execution("imp")
    record.progress = Progress(0, None, "pending")
    assert await executions.create(record, b"p", max_live_per_owner=9)
    started = await executions.start("imp", NOW)
    assert started is not None
    assert started.progress.message == IMPORTING
    assert await executions.transition("imp", "failed", NOW + 1, error={"code": "X", "message": "disk full"})
    assert await _message(first, "imp") == "failed: disk full"
    retried = await executions.retry("imp", "alice", NOW + 2)
    assert retried is not None
    assert retried.progress.message == IMPORTING
    assert await executions.fail_abandoned(set(), NOW + 3, NOW + 10) == ["imp"]
    assert await _message(first, "imp") == f"failed: {ABANDONED['message']}"
    export = _execution("exp")
    export.kind = "export"
    assert await executions.create(export, None, max_live_per_owner=9)
    assert await executions.start("exp", NOW + 11)
    assert await _message(first, "exp") == EXPORTING
    await first.close()
    backend.opened.remove(first)
    second = await backend.open()
    assert await second.executions.recover(NOW + 100, 15.0) == ["exp"]
    assert (await _message(second, "exp") or "").startswith("failed: The replica running this execution stopped")


async def _message(store: Store, execution_id: str) -> str | None:
    found = await store.executions.load(execution_id)
    assert found is not None
    return found.progress.message
