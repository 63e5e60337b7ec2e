"""The `Store` contract (store/base.py), run on every engine: sessions, their caps, the SSE event log."""

from __future__ import annotations

import asyncio
import multiprocessing

import anyio
import pytest

from aql_mcp.exceptions import StoreError, UpstreamUnavailable
from aql_mcp.store.base import Store
from tests.support.engines import Backend, admit_one, race_in_another_process, write_lock
from tests.support.store import admit, record, seqs

pytestmark = pytest.mark.anyio


async def test_create_session_stops_at_max_open(store: Store) -> None:
    assert await admit(store, record("s1"), max_open=2) == "created"
    assert await admit(store, record("s2", owner="owner-b"), max_open=2) == "created"
    assert await admit(store, record("s3"), max_open=2) == "table_full"
    assert await store.count_sessions() == 2
    assert await store.get_session("s3") is None


async def test_create_session_stops_at_the_owners_cap_first(store: Store) -> None:
    """corporate §14: one caller may not take the whole table; its own cap is checked first."""
    assert await admit(store, record("a1"), max_per_owner=1) == "created"
    assert await admit(store, record("a2"), max_per_owner=1, max_open=1) == "owner_full"
    assert await admit(store, record("b1", owner="owner-b"), max_per_owner=1) == "created"
    assert await store.count_sessions(owner="owner-a") == 1


async def test_caps_hold_across_two_replicas(backend: Backend) -> None:
    first, second = await backend.open(), await backend.open()
    assert await admit(first, record("s1"), max_open=2) == "created"
    assert await admit(second, record("s2", owner="owner-b"), max_open=2) == "created"
    assert await admit(first, record("s3"), max_open=2) == "table_full"
    assert await admit(second, record("s4"), max_open=2) == "table_full"
    assert await second.count_sessions() == 2


async def test_racing_creations_never_pass_the_caps(backend: Backend) -> None:
    """The cap is checked and applied inside the engine: 60 concurrent creations on two replicas,
    for a table of 10 and an owner cap of 4, admit exactly 10 sessions and 4 of the one owner."""
    replicas = [await backend.open(), await backend.open()]
    outcomes: list[str] = []

    async def create(index: int) -> None:
        owner = "greedy" if index % 2 else f"owner-{index}"
        session = record(f"s{index}", owner=owner)
        outcomes.append(await admit(replicas[index % 2], session, max_open=10, max_per_owner=4))

    async with anyio.create_task_group() as group:
        for index in range(60):
            group.start_soon(create, index)
    assert outcomes.count("created") == 10
    assert await replicas[0].count_sessions() == 10
    assert await replicas[1].count_sessions(owner="greedy") <= 4


async def test_get_session_returns_what_was_stored(store: Store) -> None:
    await admit(store, record("s1"))
    assert await store.get_session("s1") == record("s1")
    assert await store.get_session("missing") is None


async def test_touch_session_updates_last_seen(store: Store) -> None:
    await admit(store, record("s1", last_seen=100.0))
    await store.touch_session("s1", 250.0)
    stored = await store.get_session("s1")
    assert stored is not None
    assert stored.last_seen == 250.0
    assert stored.created_at == 100.0


async def test_set_log_level_is_stored(store: Store) -> None:
    await admit(store, record("s1"))
    await store.set_log_level("s1", "debug")
    stored = await store.get_session("s1")
    assert stored is not None
    assert stored.log_level == "debug"


async def test_delete_session_removes_it_and_its_events(store: Store) -> None:
    await admit(store, record("s1"))
    await admit(store, record("s2"))
    await store.append_event("s1", "g", b"one", 100.0)
    await store.append_event("s2", "g", b"two", 100.0)
    assert await store.delete_session("s1")
    assert await store.get_session("s1") is None
    assert await seqs(store, "s1", "g") == []
    assert await seqs(store, "s2", "g") == [1]
    assert not await store.delete_session("s1")


async def test_expire_sessions_returns_the_idle_ids_and_deletes_their_events(store: Store) -> None:
    await admit(store, record("idle-1", last_seen=100.0))
    await admit(store, record("idle-2", last_seen=150.0))
    await admit(store, record("active", last_seen=300.0))
    await store.append_event("idle-1", "g", b"x", 100.0)
    await store.append_event("active", "g", b"y", 300.0)
    assert sorted(await store.expire_sessions(200.0)) == ["idle-1", "idle-2"]
    assert await store.get_session("idle-1") is None
    assert await store.get_session("active") is not None
    assert await seqs(store, "idle-1", "g") == []
    assert await seqs(store, "active", "g") == [1]
    assert await store.expire_sessions(200.0) == []


async def test_events_are_numbered_per_stream_and_read_back_in_order(store: Store) -> None:
    await admit(store, record("s1"))
    numbers = [await store.append_event("s1", "a", f"event-{i}".encode(), 100.0) for i in (1, 2, 3)]
    assert numbers == [1, 2, 3]
    events = await store.events_after("s1", "a", 0)
    assert [(e.seq, e.data) for e in events] == [(1, b"event-1"), (2, b"event-2"), (3, b"event-3")]
    assert await seqs(store, "s1", "a", after=1) == [2, 3]
    assert await seqs(store, "s1", "a", after=3) == []


async def test_events_are_kept_apart_by_stream_and_session(store: Store) -> None:
    await admit(store, record("s1"))
    await admit(store, record("s2"))
    assert await store.append_event("s1", "a", b"s1-a", 100.0) == 1
    assert await store.append_event("s1", "b", b"s1-b", 100.0) == 1
    assert await store.append_event("s2", "a", b"s2-a", 100.0) == 1
    assert [e.data for e in await store.events_after("s1", "a", 0)] == [b"s1-a"]
    assert [e.data for e in await store.events_after("s1", "b", 0)] == [b"s1-b"]
    assert [e.data for e in await store.events_after("s2", "a", 0)] == [b"s2-a"]


async def test_racing_appends_on_two_replicas_get_distinct_gap_free_numbers(backend: Backend) -> None:
    """A stream written by two replicas at once (a notification from A, a response on B) never
    repeats or skips a number, so `Last-Event-ID` replays each event exactly once."""
    replicas = [await backend.open(), await backend.open()]
    await admit(replicas[0], record("s1"))
    numbers: list[int] = []

    async def append(index: int) -> None:
        numbers.append(await replicas[index % 2].append_event("s1", "g", str(index).encode(), 100.0))

    async with anyio.create_task_group() as group:
        for index in range(40):
            group.start_soon(append, index)
    assert sorted(numbers) == list(range(1, 41))
    assert len(await replicas[1].events_after("s1", "g", 0)) == 40


async def test_numbers_continue_after_old_events_are_purged(store: Store) -> None:
    await admit(store, record("s1"))
    await store.append_event("s1", "a", b"old", 50.0)
    await store.append_event("s1", "a", b"old", 60.0)
    assert await store.purge_events(200.0) == 2
    assert await store.append_event("s1", "a", b"new", 300.0) == 3


async def test_event_for_an_unknown_session_is_refused(store: Store) -> None:
    with pytest.raises(StoreError):
        await store.append_event("missing", "a", b"x", 100.0)


async def test_purge_events_removes_only_older_events(store: Store) -> None:
    await admit(store, record("s1"))
    await store.append_event("s1", "a", b"old", 100.0)
    await store.append_event("s1", "a", b"older", 50.0)
    await store.append_event("s1", "a", b"new", 300.0)
    assert await store.purge_events(200.0) == 2
    assert await seqs(store, "s1", "a") == [3]
    assert await store.get_session("s1") is not None


async def test_store_is_ready_only_while_open(backend: Backend) -> None:
    from aql_mcp.store.factory import open_store

    store = open_store(backend.settings)
    assert not await store.is_ready()
    await store.open()
    assert await store.is_ready()
    await store.close()
    assert not await store.is_ready()


async def test_store_is_writable_only_while_open(backend: Backend) -> None:
    from aql_mcp.store.factory import open_store

    store = open_store(backend.settings)
    assert not await store.is_writable()
    await store.open()
    assert await store.is_writable()
    assert await store.is_writable()
    await store.close()
    assert not await store.is_writable()


async def test_store_is_not_writable_while_another_client_holds_the_lock_and_is_again_after(
    backend: Backend,
) -> None:
    """The write probe of `/ready` (issue 12): false, not an exception and not a hang, while a write
    cannot get through; reads still pass meanwhile."""
    store = await backend.open()
    await admit(store, record("s1"))
    async with write_lock(backend, "replicas"):
        assert not await store.is_writable()
        assert await store.is_ready()
        assert await store.get_session("s1") is not None
    assert await store.is_writable()


async def test_a_write_that_cannot_get_the_lock_fails_alone_and_leaves_nothing(backend: Backend) -> None:
    """Store errors stay on the calls that hit them (issue 12): the write fails with `StoreError`
    after the lock timeout, nothing of it is stored, and the store writes again once the lock is gone."""
    store = await backend.open(lock_timeout_seconds=0.2)
    await admit(store, record("s1"))
    async with write_lock(backend, "sessions"):
        with pytest.raises(StoreError):
            await admit(store, record("s2"))
        with pytest.raises(StoreError):
            await store.touch_session("s1", 500.0)
        assert await store.count_sessions() == 1
    assert await store.get_session("s2") is None
    kept = await store.get_session("s1")
    assert kept is not None
    assert kept.last_seen == 100.0
    assert await admit(store, record("s2")) == "created"


async def test_writes_queued_behind_a_blocked_one_fail_in_their_own_time(backend: Backend) -> None:
    """Each waits at most the lock timeout from its own call, not the timeouts of those ahead of it
    in turn (the bound below is far from what ten waits in turn would take)."""
    store = await backend.open(lock_timeout_seconds=0.5)
    async with write_lock(backend, "sessions"):
        with anyio.fail_after(4):
            results = await asyncio.gather(*(admit(store, record(f"q{n}")) for n in range(10)), return_exceptions=True)
    assert all(isinstance(result, StoreError) for result in results)
    assert await store.count_sessions() == 0


async def test_closed_store_raises_upstream_unavailable(backend: Backend) -> None:
    from aql_mcp.store.factory import open_store

    store = open_store(backend.settings)
    await store.open()
    await store.close()
    with pytest.raises(UpstreamUnavailable):
        await store.get_session("s1")


async def test_duplicate_session_id_changes_nothing(store: Store) -> None:
    await admit(store, record("s1", owner="owner-a"))
    with pytest.raises(StoreError):
        await admit(store, record("s1", owner="owner-b"))
    assert await store.count_sessions() == 1
    stored = await store.get_session("s1")
    assert stored is not None
    assert stored.owner == "owner-a"
    assert await admit(store, record("s2")) == "created"
    assert await store.count_sessions() == 2


async def test_delete_session_is_visible_to_another_replica(backend: Backend) -> None:
    store, other = await backend.open(), await backend.open()
    await admit(store, record("s1"))
    await store.append_event("s1", "g", b"x", 100.0)
    assert await store.delete_session("s1")
    assert await other.get_session("s1") is None
    assert await seqs(other, "s1", "g") == []


async def test_two_processes_racing_never_pass_the_session_cap(backend: Backend) -> None:
    """Two OS processes, each with its own connection(s), create 25 sessions each at the same moment
    for a table of 20: the engine admits exactly 20 (store/base.py: caps inside the engine)."""
    spawn = multiprocessing.get_context("spawn")
    ready, go = spawn.Event(), spawn.Event()
    child = spawn.Process(target=race_in_another_process, args=(backend, "child-", 25, 20, ready, go))
    child.start()
    store = await backend.open()
    try:
        with anyio.fail_after(60):
            while not ready.is_set():  # noqa: ASYNC110 - another process's doing
                await anyio.sleep(0.02)
        go.set()
        here = await asyncio.gather(*(admit_one(store, f"parent-{index}", 20) for index in range(25)))
        await anyio.to_thread.run_sync(child.join, 60)
    finally:
        if child.is_alive():
            child.kill()
    assert child.exitcode == 0
    assert await store.count_sessions() == 20
    assert here.count("created") <= 20
