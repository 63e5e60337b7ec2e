"""Scan slots on every engine (docs/store.md, "Scan slots"): a listing no declared index answers runs
in one of `store.scan_concurrency` slots of its replica, apart from every other call; a second one
waits for a slot while gets, plain and indexed listings go on; a wait past the listing's time is
refused as a listing that ran too long, leaving nothing taken and nobody queued."""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import asyncpg
import pytest

from aql_mcp.plugins.records.indexes import index_of, scans
from aql_mcp.plugins.records.listing import Condition, Listing
from aql_mcp.plugins.records.store import ListingTimedOut, NewRecord, Quota, RecordStore
from aql_mcp.store.base import Store
from tests.operations.client import aql_session, records_settings
from tests.support.engines import Backend
from tests.support.wait import eventually

pytestmark = pytest.mark.anyio
QUOTA = Quota(max_records=10_000, max_bytes=10_000_000)
STATUS = index_of("status", "string")
INDEXED = frozenset({STATUS})
# A substring of the title: no index serves it, so it scans (and carries the unindexed warning).
SCAN = Listing(size=50, conditions=(Condition(("title",), "contains", "7"),), indexes=INDEXED)
SEARCH = Listing(size=50, terms=("title",), indexes=INDEXED)
SERVED = Listing(size=50, conditions=(Condition(("status",), "eq", "s1"),), indexes=INDEXED)
SORTED_BY_INDEX = Listing(size=50, conditions=(Condition(("status",), "gte", "s1"),), sort=("status",), indexes=INDEXED)
# Who holds the only slot in these tests: another tenant's scan.
HOLDER = "holder"


async def _filled(backend: Backend, **store: Any) -> tuple[Store, RecordStore]:
    opened = await backend.open(**store)
    records: RecordStore = opened.records
    await records.create_collection("t1", "c", "", None, "now", indexes=(STATUS,), max_indexes=10)
    await records.build_index(STATUS)
    batch = [NewRecord("c", f"r{n:03d}", {"title": f"title {n}", "status": f"s{n % 3}"}, "e", "now") for n in range(60)]
    await records.create_records("t1", "c", batch, QUOTA)
    return opened, records


@asynccontextmanager
async def slot_taken(store: Store, backend: Backend) -> AsyncIterator[threading.Event]:
    """A scan of another tenant holds a slot of the engine (through its own `scan`, as a plugin's
    facet does) until the block ends."""
    engine: Any = getattr(store, "engine")  # noqa: B009 - the engine's own surface, not the Store protocol
    started, release = threading.Event(), threading.Event()

    def hold(db: Any) -> None:
        started.set()
        release.wait()

    async def hold_connection(connection: Any) -> None:
        started.set()
        await anyio.to_thread.run_sync(release.wait)

    work = hold if backend.engine == "sqlite" else hold_connection
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(functools.partial(engine.scan, work, tenant=HOLDER, wait=10.0))
            await eventually(started.is_set, "the holding scan did not start")
            yield release
            release.set()
    finally:
        release.set()


def _ids(page: Any) -> list[str]:
    return [record.id for record, _ in page.items]


def test_a_listing_scans_when_a_filter_sort_or_search_has_no_index() -> None:
    assert scans(SCAN)
    assert scans(SEARCH)
    assert scans(Listing(size=5, conditions=SERVED.conditions, sort=("title",), indexes=INDEXED))
    assert not scans(SERVED)
    assert not scans(SORTED_BY_INDEX)
    assert not scans(Listing(size=5, conditions=(Condition(("id",), "eq", "r001"),)))
    assert not scans(Listing(size=5))


async def test_a_second_scan_waits_for_the_slot_while_gets_and_indexed_listings_go_on(backend: Backend) -> None:
    store, records = await _filled(backend, scan_concurrency=1)
    engine: Any = getattr(store, "engine")  # noqa: B009
    expected = _ids(await records.list_records("t1", "c", SCAN))
    assert expected
    async with slot_taken(store, backend):
        waiting = asyncio.ensure_future(records.list_records("t1", "c", SCAN))
        await eventually(lambda: engine.scan_turns.queued == 1, "the second scan did not queue for the slot")
        # Everything else answers while the scan waits: none of it takes or waits for a scan slot.
        with anyio.fail_after(10):
            assert (await records.get_record("t1", "c", "r007")) is not None
            assert len(_ids(await records.list_records("t1", "c", SERVED))) == 20
            assert len(_ids(await records.list_records("t1", "c", SORTED_BY_INDEX))) == 40
            assert len(_ids(await records.list_records("t1", "c", Listing(size=5)))) == 5
            await records.create_record("t1", NewRecord("c", "new", {"title": "x"}, "e", "now"), QUOTA, None)
        assert not waiting.done()
        assert engine.scan_turns.queued == 1
        assert engine.scan_turns.held("t1") == 0
    # The slot given back, the waiting scan runs in it and answers in full.
    with anyio.fail_after(10):
        assert _ids(await waiting) == expected
    assert engine.scan_turns.queued == 0


@pytest.mark.parametrize("engine", ["postgres"])
async def test_on_postgres_a_scan_in_progress_holds_the_slot_and_a_get_goes_on(backend: Backend, engine: str) -> None:
    """The same with a real scanning listing in the slot: another client's lock on the collections
    table holds it in its first statement (a get reads only the records table, so it passes)."""
    if backend.engine != engine:
        pytest.skip("a lock only PostgreSQL's readers wait for")
    store, records = await _filled(backend, scan_concurrency=1, lock_timeout_seconds=30)
    engine_: Any = getattr(store, "engine")  # noqa: B009
    expected = _ids(await records.list_records("t1", "c", SCAN))
    locker = await asyncpg.connect(backend.url)
    try:
        transaction = locker.transaction()
        await transaction.start()
        await locker.execute("LOCK TABLE record_collections IN ACCESS EXCLUSIVE MODE")
        first = asyncio.ensure_future(records.list_records("t1", "c", SCAN))
        await eventually(lambda: engine_.scan_turns.held("t1") == 1, "the first scan did not take the slot")
        second = asyncio.ensure_future(records.list_records("t1", "c", SCAN))
        await eventually(lambda: engine_.scan_turns.queued == 1, "the second scan did not queue for the slot")
        with anyio.fail_after(10):
            assert (await records.get_record("t1", "c", "r007")) is not None
        assert not first.done()
        assert not second.done()
        await transaction.rollback()
        with anyio.fail_after(10):
            assert _ids(await first) == _ids(await second) == expected
    finally:
        await locker.close()
    assert engine_.scan_turns.queued == engine_.scan_turns.held("t1") == 0


async def test_a_scan_that_gets_no_slot_in_its_time_is_refused_and_leaves_nothing_behind(backend: Backend) -> None:
    store, records = await _filled(backend, scan_concurrency=1)
    engine: Any = getattr(store, "engine")  # noqa: B009
    records.listing_seconds = 0.3
    async with slot_taken(store, backend):
        with anyio.fail_after(10), pytest.raises(ListingTimedOut) as refused:
            await records.list_records("t1", "c", SEARCH)
        assert refused.value.seconds == 0.3
        # It left the queue and holds nothing; calls that scan nothing still answer.
        assert engine.scan_turns.queued == 0
        assert engine.scan_turns.held("t1") == 0
        assert len(_ids(await records.list_records("t1", "c", SERVED))) == 20
    # The slot is free again and the next scan takes it at once, with the whole of its time.
    assert engine.scan_turns.held(HOLDER) == 0
    records.listing_seconds = 10.0
    assert len(_ids(await records.list_records("t1", "c", SEARCH))) == 50
    assert engine.scan_turns.queued == 0
    assert engine.scan_turns.held("t1") == 0


async def test_a_cancelled_scan_leaves_the_queue(backend: Backend) -> None:
    store, records = await _filled(backend, scan_concurrency=1)
    engine: Any = getattr(store, "engine")  # noqa: B009
    async with slot_taken(store, backend):
        waiting = asyncio.ensure_future(records.list_records("t1", "c", SCAN))
        await eventually(lambda: engine.scan_turns.queued == 1, "the scan did not queue for the slot")
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert engine.scan_turns.queued == 0
    assert engine.scan_turns.held("t1") == 0


async def test_a_listing_out_of_time_is_refused_through_mcp_aql_as_a_listing_timeout(tmp_path: Path) -> None:
    """The refusal of a listing whose time ran out, slot wait or scan, as the caller sees it (MCP-AQL
    error codes §4.7): a limit error naming `listing_timeout`; a plain listing still answers."""
    settings = records_settings(tmp_path, store={"listing_timeout_seconds": 1e-6, "scan_concurrency": 1})
    async with aql_session(settings) as aql:
        assert (await aql.call("mcp_aql_create", "create_collection", collection="notes"))["success"]
        made = await aql.call("mcp_aql_create", "create_record", collection="notes", data={"title": "a"})
        assert made["success"], made
        refused = await aql.call("mcp_aql_read", "list_records", collection="notes", filter={"title": "a"})
        plain = await aql.call("mcp_aql_read", "list_records", collection="notes")
    assert refused["success"] is False
    assert refused["error"]["code"] == "VALIDATION_PAYLOAD_TOO_LARGE"
    assert refused["error"]["details"] == {"limit_type": "listing_timeout", "limit_value": 1e-6, "unit": "seconds"}
    assert plain["success"] is True
