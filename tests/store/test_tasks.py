"""The `TaskStore` contract on every engine: owners, the cap on live tasks, partial answers,
terminal statuses that never change, expiry (the Tasks extension, docs/eras.md "Tasks")."""

from __future__ import annotations

import anyio
import pytest

from aql_mcp.store.base import Store
from aql_mcp.store.tasks import TaskRecord
from tests.support.engines import Backend

pytestmark = pytest.mark.anyio
NOW = 1_000_000.0
ASK = {"method": "elicitation/create", "params": {"mode": "form", "message": "ok?", "requestedSchema": {}}}


def _task(task_id: str, owner: str = "alice", *, ttl: float = 60.0) -> TaskRecord:
    return TaskRecord(
        id=task_id,
        owner=owner,
        tool="slow_compute",
        status="working",
        created_at=NOW,
        updated_at=NOW,
        expires_at=NOW + ttl,
        ttl_ms=int(ttl * 1000),
        poll_ms=500,
    )


async def test_a_task_is_found_by_its_owner_only_and_not_after_it_expired(store: Store) -> None:
    assert await store.tasks.create_task(_task("t1"), max_live_per_owner=5, max_stored_per_owner=100, now=NOW)
    found = await store.tasks.get_task("t1", "alice", NOW + 1)
    assert found is not None
    assert found.status == "working"
    assert found.ttl_ms == 60_000
    assert await store.tasks.get_task("t1", "mallory", NOW + 1) is None
    assert await store.tasks.get_task("t1", "alice", NOW + 61) is None
    assert not await store.tasks.cancel_task("t1", "mallory", NOW + 1)
    assert await store.tasks.answer_task("t1", "mallory", {}, NOW + 1) == "unknown"


async def test_live_tasks_per_owner_are_capped_and_a_finished_one_frees_its_slot(store: Store) -> None:
    tasks = store.tasks
    assert await tasks.create_task(_task("a1"), max_live_per_owner=2, max_stored_per_owner=100, now=NOW)
    assert await tasks.create_task(_task("a2"), max_live_per_owner=2, max_stored_per_owner=100, now=NOW)
    assert not await tasks.create_task(_task("a3"), max_live_per_owner=2, max_stored_per_owner=100, now=NOW)
    assert await tasks.create_task(_task("b1", owner="bob"), max_live_per_owner=2, max_stored_per_owner=100, now=NOW)
    assert await tasks.finish_task("a1", "completed", NOW, result={"content": []})
    assert await tasks.create_task(_task("a3"), max_live_per_owner=2, max_stored_per_owner=100, now=NOW)
    assert await tasks.get_task("a3", "alice", NOW) is not None


async def test_expired_tasks_are_deleted_by_the_next_creation(store: Store) -> None:
    tasks = store.tasks
    assert await tasks.create_task(_task("old", ttl=1), max_live_per_owner=1, max_stored_per_owner=100, now=NOW)
    assert await tasks.create_task(_task("new"), max_live_per_owner=1, max_stored_per_owner=100, now=NOW + 5)
    assert await tasks.load_task("old") is None


async def test_answers_remove_only_the_questions_they_answer_and_the_last_resumes_the_task(store: Store) -> None:
    tasks = store.tasks
    await tasks.create_task(_task("t1"), max_live_per_owner=5, max_stored_per_owner=100, now=NOW)
    assert await tasks.park_task("t1", {"a": ASK, "b": ASK}, NOW)
    assert await tasks.answer_task("t1", "alice", {"a": {"action": "accept"}, "zz": {}}, NOW) == "stored"
    parked = await tasks.get_task("t1", "alice", NOW)
    assert parked is not None
    assert parked.status == "input_required"
    assert list(parked.input_requests) == ["b"]
    assert parked.answers == {"a": {"action": "accept"}}
    assert await tasks.answer_task("t1", "alice", {"zz": {}}, NOW) == "ignored"
    assert await tasks.answer_task("t1", "alice", {"b": {"action": "decline"}}, NOW) == "stored"
    resumed = await tasks.load_task("t1")
    assert resumed is not None
    assert resumed.status == "working"
    assert resumed.input_requests == {}
    assert set(resumed.answers) == {"a", "b"}


async def test_a_terminal_status_never_changes_and_cancelling_it_is_acknowledged(store: Store) -> None:
    tasks = store.tasks
    await tasks.create_task(_task("t1"), max_live_per_owner=5, max_stored_per_owner=100, now=NOW)
    assert await tasks.cancel_task("t1", "alice", NOW)
    assert not await tasks.finish_task("t1", "completed", NOW, result={"content": []})
    assert not await tasks.park_task("t1", {"a": ASK}, NOW)
    assert await tasks.cancel_task("t1", "alice", NOW)
    ended = await tasks.get_task("t1", "alice", NOW)
    assert ended is not None
    assert ended.status == "cancelled"
    assert ended.result is None


async def test_a_failed_task_keeps_its_error_and_message(store: Store) -> None:
    tasks = store.tasks
    await tasks.create_task(_task("t1"), max_live_per_owner=5, max_stored_per_owner=100, now=NOW)
    error = {"code": -32603, "message": "Internal error"}
    assert await tasks.finish_task("t1", "failed", NOW + 2, error=error, message="boom")
    failed = await tasks.get_task("t1", "alice", NOW + 2)
    assert failed is not None
    assert failed.error == error
    assert failed.status_message == "boom"
    assert failed.updated_at == NOW + 2
    assert failed.result is None


async def test_replicas_racing_for_the_last_slot_of_an_owner_cannot_both_win(backend: Backend) -> None:
    """The cap is checked in the same transaction as the insert (store contract)."""
    replicas = [await backend.open(), await backend.open()]
    outcomes: list[bool] = []

    async def create(n: int) -> None:
        outcomes.append(
            await replicas[n % 2].tasks.create_task(
                _task(f"r{n}"), max_live_per_owner=1, max_stored_per_owner=100, now=NOW
            )
        )

    async with anyio.create_task_group() as group:
        for n in range(6):
            group.start_soon(create, n)
    assert outcomes.count(True) == 1


async def test_ended_tasks_count_against_the_owners_stored_cap_until_they_expire(store: Store) -> None:
    """Finished tasks keep their results until they expire; the stored cap bounds how many."""
    tasks = store.tasks
    assert await tasks.create_task(_task("s1"), max_live_per_owner=5, max_stored_per_owner=2, now=NOW)
    assert await tasks.finish_task("s1", "completed", NOW + 1, result={"content": []})
    assert await tasks.create_task(_task("s2"), max_live_per_owner=5, max_stored_per_owner=2, now=NOW)
    assert not await tasks.create_task(_task("s3"), max_live_per_owner=5, max_stored_per_owner=2, now=NOW)
