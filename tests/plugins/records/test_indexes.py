"""Declared indexes on every engine (docs/store.md, "Indexed fields"): the plan reads the index for
equality, range and sort; an indexed listing answers exactly what a scan answers; builds leave other
calls running (PostgreSQL: CREATE INDEX CONCURRENTLY; SQLite: a connection and thread of its own); a
failed concurrent build (an INVALID index) is found and built again; listings that run too long stop."""

from __future__ import annotations

import asyncio
import sqlite3
from dataclasses import replace
from typing import Any

import anyio
import asyncpg
import pytest

from aql_mcp.exceptions import StoreError
from aql_mcp.plugins.records.compiler import page_query
from aql_mcp.plugins.records.indexes import index_of, sort_index, unserved_fields
from aql_mcp.plugins.records.listing import Condition, Index, Key, Listing
from aql_mcp.plugins.records.postgres import COLUMNS as PG_COLUMNS
from aql_mcp.plugins.records.postgres import DIALECT as PG_DIALECT
from aql_mcp.plugins.records.sqlite import COLUMNS as SQLITE_COLUMNS
from aql_mcp.plugins.records.sqlite import DIALECT as SQLITE_DIALECT
from aql_mcp.plugins.records.store import (
    AlreadyExists,
    IndexMissing,
    ListingTimedOut,
    Missing,
    NewRecord,
    Quota,
    QuotaExceeded,
    RecordStore,
    ScanTooLarge,
)
from aql_mcp.store.factory import SQLITE_FILE
from tests.support.engines import Backend, write_lock
from tests.support.wait import arrives

pytestmark = pytest.mark.anyio
QUOTA = Quota(max_records=100_000, max_bytes=100_000_000)
STATUS = index_of("status", "string")
SIZE = index_of("meta.size", "number")
COUNT = 3000


def _data(n: int) -> dict[str, Any]:
    """Mostly typed values, with the other JSON types and a missing field mixed in."""
    status: Any = f"s{n % 50:02d}"
    if n % 97 == 0:
        status = n  # a number where strings are indexed
    meta: dict[str, Any] = {"size": n}
    if n % 89 == 0:
        meta = {"size": str(n)}  # a string where numbers are indexed
    elif n % 83 == 0:
        meta = {"size": n % 2 == 0}  # a boolean is not a number
    elif n % 79 == 0:
        meta = {}
    return {"status": status, "meta": meta, "n": n}


async def _filled(backend: Backend, count: int = COUNT, **store: Any) -> RecordStore:
    records: RecordStore = (await backend.open(**store)).records
    await records.create_collection("t1", "c", "", None, "now", indexes=(STATUS, SIZE), max_indexes=10)
    await records.create_collection("t2", "c", "", None, "now")
    batch = [NewRecord("c", f"r{n:05d}", _data(n), "e", "now") for n in range(count)]
    for start in range(0, count, 1000):
        await records.create_records("t1", "c", batch[start : start + 1000], QUOTA)
    await records.create_records("t2", "c", batch[:100], QUOTA)
    return records


def _ids(page: Any) -> list[str]:
    return [record.id for record, _ in page.items]


async def _plan(backend: Backend, listing: Listing) -> str:
    """The engine's plan of the listing's page query, as text."""
    if backend.engine == "sqlite":
        compiled = page_query(listing, SQLITE_DIALECT, SQLITE_COLUMNS, ("t1", "c"))
        db = sqlite3.connect(backend.path / SQLITE_FILE)
        try:
            db.execute("ANALYZE")
            rows = db.execute("EXPLAIN QUERY PLAN " + compiled.sql, compiled.params).fetchall()
        finally:
            db.close()
        return "\n".join(str(row[-1]) for row in rows)
    compiled = page_query(listing, PG_DIALECT, PG_COLUMNS, ("t1", "c"))
    connection = await asyncpg.connect(backend.url)
    try:
        await connection.execute("ANALYZE records")
        rows = await connection.fetch("EXPLAIN " + compiled.sql, *compiled.params)
    finally:
        await connection.close()
    return "\n".join(row[0] for row in rows)


INDEXED = frozenset({STATUS, SIZE})
PLANNED = [
    ("equality", Listing(size=10, conditions=(Condition(("status",), "eq", "s07"),), indexes=INDEXED), STATUS),
    # Values few records hold (PostgreSQL would rightly read the position index for common ones and stop early).
    ("in", Listing(size=10, conditions=(Condition(("status",), "in", ["x01", "x02"]),), indexes=INDEXED), STATUS),
    ("range", Listing(size=10, conditions=(Condition(("meta", "size"), "gte", 2990),), indexes=INDEXED), SIZE),
    (
        "range and sort",
        Listing(
            size=5,
            conditions=(Condition(("meta", "size"), "gt", 10), Condition(("meta", "size"), "lt", 40)),
            sort=("meta", "size"),
            descending=True,
            indexes=INDEXED,
        ),
        SIZE,
    ),
]


@pytest.mark.parametrize(("name", "listing", "index"), PLANNED, ids=[p[0] for p in PLANNED])
async def test_the_plan_reads_the_declared_index(backend: Backend, name: str, listing: Listing, index: Index) -> None:
    records = await _filled(backend)
    await records.build_index(index)
    plan = await _plan(backend, listing)
    assert index.name in plan, plan
    if listing.sort is not None:
        # The index gives the order: no sort step.
        assert "TEMP B-TREE" not in plan.upper(), plan
        assert "Sort" not in plan, plan


async def test_an_undeclared_field_is_a_scan_and_says_so(backend: Backend) -> None:
    records = await _filled(backend)
    for index in (STATUS, SIZE):
        await records.build_index(index)
    listing = Listing(size=10, conditions=(Condition(("n",), "eq", 7),), indexes=INDEXED)
    assert STATUS.name not in await _plan(backend, listing)
    assert unserved_fields(listing) == ["n"]
    page = await records.list_records("t1", "c", listing)
    assert _ids(page) == ["r00007"]


def _listings() -> list[Listing]:
    size = ("meta", "size")
    return [
        Listing(size=500, conditions=(Condition(("status",), "eq", "s07"),)),
        Listing(size=500, conditions=(Condition(("status",), "in", ["s01", "s49"]),)),
        Listing(size=500, conditions=(Condition(("status",), "lt", "s02"),)),
        Listing(size=500, conditions=(Condition(size, "gte", 2900),)),
        Listing(size=500, conditions=(Condition(size, "lte", 100.5),)),
        Listing(size=500, conditions=(Condition(size, "eq", 1000.0),)),
        Listing(size=500, conditions=(Condition(size, "in", [0, 97, 178]),)),
        Listing(size=7, conditions=(Condition(size, "gt", 100), Condition(size, "lt", 200)), sort=size),
        Listing(size=7, conditions=(Condition(size, "gt", 100),), sort=size, descending=True),
        Listing(size=7, conditions=(Condition(("status",), "gte", "s45"),), sort=("status",), descending=True),
    ]


async def test_an_indexed_listing_answers_what_the_scan_answers_page_by_page(backend: Backend) -> None:
    """Mixed types at the indexed paths, both directions, cursors from either kind of listing."""
    records = await _filled(backend, count=1200)
    for index in (STATUS, SIZE):
        await records.build_index(index)
    for plain in _listings():
        indexed = replace(plain, indexes=INDEXED)
        assert sort_index(indexed) is not None or plain.sort is None
        assert await _walk(records, indexed) == await _walk(records, plain), plain
        assert await _walk(records, indexed, forward=False) == await _walk(records, plain, forward=False), plain


async def _walk(records: RecordStore, listing: Listing, *, forward: bool = True) -> list[tuple[str, Key]]:
    """Every record of the listing, page by page with cursors (at most 40 pages)."""
    seen: list[tuple[str, Key]] = []
    cursor: Key | None = None
    for _ in range(40):
        step = replace(listing, forward=forward, cursor=cursor)
        page = await records.list_records("t1", "c", step)
        items = [(record.id, key) for record, key in page.items]
        seen += items if forward else items[::-1]
        more = page.has_next if forward else page.has_previous
        if not more or not items:
            break
        cursor = page.items[-1][1] if forward else page.items[0][1]
    return seen


async def test_an_indexed_listing_is_not_held_to_the_scan_budget(backend: Backend) -> None:
    records = await _filled(backend, count=300, listing_scan_rows=100)
    served = Listing(size=5, conditions=(Condition(("status",), "eq", "s07"),), indexes=INDEXED)
    assert len((await records.list_records("t1", "c", served)).items) == 5
    with pytest.raises(ScanTooLarge):
        await records.list_records("t1", "c", Listing(size=5, conditions=(Condition(("n",), "eq", 7),)))


async def test_declarations_are_refused_past_the_limit_twice_and_for_unknown_names(backend: Backend) -> None:
    records: RecordStore = (await backend.open()).records
    await records.create_collection("t1", "a", "", None, "now", indexes=(STATUS,), max_indexes=2)
    await records.create_collection("t1", "b", "", None, "now")
    assert await records.add_index("t1", "b", SIZE, 2) == (SIZE,)
    with pytest.raises(QuotaExceeded) as refused:
        await records.add_index("t1", "b", STATUS, 2)
    assert (refused.value.metric, refused.value.current, refused.value.limit) == ("indexes", 2, 2)
    with pytest.raises(QuotaExceeded):
        await records.create_collection("t1", "d", "", None, "now", indexes=(SIZE,), max_indexes=2)
    assert await records.get_collection("t1", "d") is None
    with pytest.raises(AlreadyExists):
        await records.add_index("t1", "a", STATUS, 10)
    with pytest.raises(Missing):
        await records.add_index("t1", "nope", STATUS, 10)
    with pytest.raises(IndexMissing):
        await records.remove_index("t1", "b", STATUS)
    # Another tenant has a limit of its own.
    await records.create_collection("t2", "a", "", None, "now", indexes=(STATUS, SIZE), max_indexes=2)
    assert await records.remove_index("t1", "b", SIZE) == ()
    stored = await records.get_collection("t1", "a")
    assert stored is not None
    assert stored.indexes == (STATUS,)


async def test_the_engine_index_goes_with_its_last_declaration_and_housekeeping_repairs(backend: Backend) -> None:
    records: RecordStore = (await backend.open()).records
    await records.create_collection("t1", "a", "", None, "now", indexes=(STATUS,), max_indexes=5)
    await records.create_collection("t2", "a", "", None, "now", indexes=(STATUS,), max_indexes=5)
    await records.build_index(STATUS)
    assert await records.index_states((STATUS, SIZE)) == {STATUS: "ready", SIZE: "missing"}
    await records.remove_index("t1", "a", STATUS)
    assert await records.drop_unused_index(STATUS) is False
    assert await records.index_states((STATUS,)) == {STATUS: "ready"}
    await records.remove_index("t2", "a", STATUS)
    assert await records.drop_unused_index(STATUS) is True
    assert await records.index_states((STATUS,)) == {STATUS: "missing"}
    # A declaration whose build never ran is built by housekeeping; an undeclared index is dropped.
    await records.add_index("t1", "a", SIZE, 5)
    await records.build_index(STATUS)
    assert await records.reconcile_indexes() == 2
    assert await records.index_states((STATUS, SIZE)) == {STATUS: "missing", SIZE: "ready"}
    assert await records.reconcile_indexes() == 0


async def test_a_deleted_collection_takes_its_declarations_along(backend: Backend) -> None:
    records: RecordStore = (await backend.open()).records
    await records.create_collection("t1", "a", "", None, "now", indexes=(STATUS, SIZE), max_indexes=2)
    await records.build_index(STATUS)
    await records.delete_collection("t1", "a")
    # The tenant's count is free again, and housekeeping drops the index nobody declares.
    await records.create_collection("t1", "a", "", None, "now", indexes=(SIZE,), max_indexes=2)
    stored = await records.get_collection("t1", "a")
    assert stored is not None
    assert stored.indexes == (SIZE,)
    assert await records.reconcile_indexes() == 2
    assert await records.index_states((STATUS, SIZE)) == {STATUS: "missing", SIZE: "ready"}


async def test_a_listing_past_its_time_stops_with_a_refusal(backend: Backend) -> None:
    records = await _filled(backend, count=1000)
    search = Listing(size=5, terms=("zzz",))
    if backend.engine == "sqlite":
        records.listing_seconds = 1e-6
        with pytest.raises(ListingTimedOut):
            await records.list_records("t1", "c", search)
    else:
        # The listing waits for a lock longer than its time (lock_timeout is longer): the timeout stops it.
        records.listing_seconds = 0.2
        locker = await asyncpg.connect(backend.url)
        try:
            async with locker.transaction():
                await locker.execute("LOCK TABLE records IN ACCESS EXCLUSIVE MODE")
                with pytest.raises(ListingTimedOut):
                    await records.list_records("t1", "c", search)
        finally:
            await locker.close()
    # A plain listing has no time limit, and the connection or reader is fine afterwards.
    assert len((await records.list_records("t1", "c", Listing(size=5))).items) == 5
    records.listing_seconds = 10.0
    assert (await records.list_records("t1", "c", search)).items == []


@pytest.mark.parametrize("engine", ["postgres"])
async def test_calls_go_on_while_an_index_builds_concurrently(backend: Backend, engine: str) -> None:
    """CREATE INDEX CONCURRENTLY waits for the transactions that write the table; a plain CREATE
    INDEX would block every write meanwhile. Here a write and a listing finish while the build waits."""
    if backend.engine != engine:
        pytest.skip("PostgreSQL's concurrent build")
    records = await _filled(backend, count=200)
    blocker = await asyncpg.connect(backend.url)
    try:
        transaction = blocker.transaction()
        await transaction.start()
        await blocker.execute("UPDATE records SET size = size WHERE tenant = 't2' AND id = 'r00000'")
        build = asyncio.ensure_future(records.build_index(STATUS))
        await _until(backend, "CREATE INDEX CONCURRENTLY")
        assert await records.index_states((STATUS,)) == {STATUS: "building"}
        with anyio.fail_after(5):
            await records.create_record("t1", NewRecord("c", "late", {"status": "s07"}, "e", "now"), QUOTA, None)
            listing = Listing(size=100, conditions=(Condition(("status",), "eq", "s07"),), indexes=INDEXED)
            assert "late" in _ids(await records.list_records("t1", "c", listing))
        assert not build.done()
        await transaction.commit()
        with anyio.fail_after(30):
            await build
    finally:
        await blocker.close()
    assert await records.index_states((STATUS,)) == {STATUS: "ready"}


@pytest.mark.parametrize("engine", ["postgres"])
async def test_a_failed_concurrent_build_leaves_an_invalid_index_that_the_next_build_replaces(
    backend: Backend, engine: str
) -> None:
    if backend.engine != engine:
        pytest.skip("PostgreSQL's INVALID indexes")
    records = await _filled(backend, count=200)
    blocker = await asyncpg.connect(backend.url)
    try:
        async with blocker.transaction():
            await blocker.execute("UPDATE records SET size = size WHERE tenant = 't2' AND id = 'r00000'")
            build = asyncio.ensure_future(records.build_index(STATUS))
            await _until(backend, "CREATE INDEX CONCURRENTLY")
            await blocker.execute(
                "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE query LIKE 'CREATE INDEX CONCURRENTLY%'"
            )
            with pytest.raises(StoreError):
                await build
        valid = await blocker.fetchval(
            "SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass($1)", STATUS.name
        )
    finally:
        await blocker.close()
    assert valid is False
    assert await records.index_states((STATUS,)) == {STATUS: "invalid"}
    await records.build_index(STATUS)
    assert await records.index_states((STATUS,)) == {STATUS: "ready"}


async def _until(backend: Backend, query: str) -> None:
    """Wait until a session of the database runs `query` (and waits there)."""
    watcher = await asyncpg.connect(backend.url)

    async def running() -> bool:
        # Polled: the wait is the database server's, no event of ours marks it.
        sql = "SELECT count(*) FROM pg_stat_activity WHERE query LIKE $1 AND wait_event IS NOT NULL"
        return bool(await watcher.fetchval(sql, query + "%"))

    try:
        await arrives(running, f"no session ran {query}")
    finally:
        await watcher.close()


async def test_on_sqlite_reads_go_on_while_a_build_waits_for_the_write_lock(backend: Backend) -> None:
    """The build runs on a connection and a thread of its own: readers (WAL) are not behind it."""
    if backend.engine != "sqlite":
        pytest.skip("SQLite's build thread")
    records = await _filled(backend, count=200)
    async with write_lock(backend, "records"):
        build = asyncio.ensure_future(records.build_index(STATUS))

        async def building() -> bool:
            return await records.index_states((STATUS,)) == {STATUS: "building"}

        await arrives(building, "the build never started")
        with anyio.fail_after(5):
            assert await records.get_record("t1", "c", "r00001") is not None
            assert len((await records.list_records("t1", "c", Listing(size=3))).items) == 3
        assert not build.done()
    with anyio.fail_after(30):
        await build
    assert await records.index_states((STATUS,)) == {STATUS: "ready"}


@pytest.mark.parametrize("field", ["a'b", "a.0", "_etag", "a..b", "a b", "a.b.c.d.e", 'a"b'])
def test_a_field_that_could_not_be_spliced_safely_makes_no_index(field: str) -> None:
    with pytest.raises(ValueError, match="not an index declaration"):
        index_of(field, "string")
    with pytest.raises(ValueError, match="not an index declaration"):
        index_of("a", "boolean")  # type: ignore[arg-type]
