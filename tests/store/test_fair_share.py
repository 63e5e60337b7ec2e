"""Fair turns on the store's connections (issue 27, N2): the turns themselves, then each engine's
readers or pool shared so that one tenant's slow reads leave another tenant's read a connection."""

from __future__ import annotations

import threading
from typing import Any

import anyio
import anyio.to_thread
import pytest

from aql_mcp.store.base import Store
from aql_mcp.store.fair_share import FairShare, TurnTimedOut, tenant_share
from tests.support.engines import Backend

pytestmark = pytest.mark.anyio


async def hold(turns: FairShare, tenant: str, name: str, order: list[str], release: anyio.Event) -> None:
    async with turns.turn(tenant):
        order.append(name)
        await release.wait()


def test_a_tenants_share_is_a_part_of_the_capacity_and_at_least_one() -> None:
    assert tenant_share(4, 0.75) == 3
    assert tenant_share(10, 0.75) == 7
    assert tenant_share(2, 0.75) == 1
    assert tenant_share(1, 0.1) == 1
    assert tenant_share(4, 1.0) == 4


async def test_one_tenant_holds_at_most_its_share_and_another_tenant_takes_the_free_turn() -> None:
    turns, order, release = FairShare(capacity=4, share=3), [], anyio.Event()
    async with anyio.create_task_group() as group:
        for n in range(5):
            group.start_soon(hold, turns, "a", f"a{n}", order, release)
        await anyio.wait_all_tasks_blocked()
        assert order == ["a0", "a1", "a2"]
        group.start_soon(hold, turns, "b", "b0", order, release)
        await anyio.wait_all_tasks_blocked()
        assert order == ["a0", "a1", "a2", "b0"]
        release.set()
    assert sorted(order) == ["a0", "a1", "a2", "a3", "a4", "b0"]


async def test_a_freed_turn_goes_to_the_waiting_tenant_that_holds_fewest() -> None:
    turns, order = FairShare(capacity=2, share=2), []
    first, rest = anyio.Event(), anyio.Event()
    async with anyio.create_task_group() as group:
        group.start_soon(hold, turns, "a", "a0", order, first)
        group.start_soon(hold, turns, "a", "a1", order, rest)
        await anyio.wait_all_tasks_blocked()
        group.start_soon(hold, turns, "a", "a2", order, rest)
        await anyio.wait_all_tasks_blocked()
        group.start_soon(hold, turns, "b", "b0", order, rest)
        await anyio.wait_all_tasks_blocked()
        first.set()
        await anyio.wait_all_tasks_blocked()
        # a2 queued first, but b holds nothing while a still holds one.
        assert order == ["a0", "a1", "b0"]
        rest.set()
    assert order == ["a0", "a1", "b0", "a2"]


async def test_one_tenants_calls_keep_their_order() -> None:
    turns, order, release = FairShare(capacity=1, share=1), [], anyio.Event()
    async with anyio.create_task_group() as group:
        for n in range(4):
            group.start_soon(hold, turns, "a", f"a{n}", order, release)
            await anyio.wait_all_tasks_blocked()
        release.set()
    assert order == ["a0", "a1", "a2", "a3"]


async def test_a_cancelled_waiter_leaves_the_queue_and_takes_no_turn() -> None:
    turns, order, release = FairShare(capacity=1, share=1), [], anyio.Event()
    async with anyio.create_task_group() as group:
        group.start_soon(hold, turns, "a", "a0", order, release)
        await anyio.wait_all_tasks_blocked()
        with anyio.CancelScope() as scope:
            scope.cancel()
            await hold(turns, "b", "cancelled", order, release)
        group.start_soon(hold, turns, "b", "b1", order, release)
        await anyio.wait_all_tasks_blocked()
        release.set()
    assert order == ["a0", "b1"]
    assert turns.held("a") == turns.held("b") == 0


async def test_a_bounded_wait_that_runs_out_raises_holding_nothing_and_leaves_the_queue() -> None:
    """The scan turns' wait (docs/store.md, "Scan slots"): past `wait`, `TurnTimedOut`, and the
    turn freed later goes to the next waiter, not to the one that gave up."""
    turns, order, release = FairShare(capacity=1, share=1), [], anyio.Event()
    async with anyio.create_task_group() as group:
        group.start_soon(hold, turns, "a", "a0", order, release)
        await anyio.wait_all_tasks_blocked()
        with pytest.raises(TurnTimedOut) as expired:
            async with turns.turn("b", wait=0.05):
                order.append("never")
        assert expired.value.seconds == 0.05
        assert turns.queued == 0
        group.start_soon(hold, turns, "c", "c0", order, release)
        await anyio.wait_all_tasks_blocked()
        assert turns.queued == 1
        release.set()
    assert order == ["a0", "c0"]
    assert turns.held("b") == turns.queued == 0
    # A free turn is taken at once, whatever the wait.
    async with turns.turn("b", wait=0):
        assert turns.held("b") == 1


# On each engine ---------------------------------------------------------------------------------


async def busy(store: Store, backend: Backend, tenant: str, release: threading.Event) -> None:
    """A read of `tenant` that keeps its SQLite reader or pooled connection until `release`."""
    engine: Any = getattr(store, "engine")  # noqa: B009 - the engines' own API, not the Store protocol
    if backend.engine == "sqlite":
        await engine.read(lambda db: release.wait(), tenant=tenant)
        return

    async def wait(connection: Any) -> None:
        await anyio.to_thread.run_sync(release.wait)

    await engine.run(wait, tenant=tenant)


async def test_a_tenant_holding_its_share_of_connections_leaves_another_tenants_read_one(backend: Backend) -> None:
    # Two readers (two pooled connections) and the default share: a tenant holds one of them.
    store = await backend.open(sqlite_readers=2, pool_max_size=2)
    await store.records.create_collection("small", "notes", "", None, "now")
    release = threading.Event()
    try:
        async with anyio.create_task_group() as group:
            for _ in range(3):
                group.start_soon(busy, store, backend, "flooder", release)
            await anyio.wait_all_tasks_blocked()
            # Before the fix the flooder's reads held both connections and this waited for good.
            with anyio.fail_after(10):
                found = await store.records.get_collection("small", "notes")
            assert found is not None
            release.set()
    finally:
        release.set()
