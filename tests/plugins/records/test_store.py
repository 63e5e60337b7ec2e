"""The `RecordStore` contract on every engine: tenant isolation, quotas inside the write transaction,
etag checks, usage, idempotency."""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime
from typing import Any

import anyio
import pytest

from aql_mcp.plugins.records.listing import Condition, Listing
from aql_mcp.plugins.records.store import (
    Idempotency,
    Missing,
    NewRecord,
    Quota,
    QuotaExceeded,
    RecordStore,
    ScanTooLarge,
    VersionMismatch,
)
from aql_mcp.store.base import Store
from tests.support.engines import Backend

pytestmark = pytest.mark.anyio
QUOTA = Quota(max_records=2, max_bytes=10_000)
QUOTA_LARGE = Quota(max_records=1000, max_bytes=1_000_000)


async def listed_ids(records: RecordStore, tenant: str, collection: str, **listing: Any) -> list[str]:
    page = await records.list_records(tenant, collection, Listing(size=listing.pop("size", 100), **listing))
    return [record.id for record, _ in page.items]


def _new(record_id: str, data: dict[str, object]) -> NewRecord:
    return NewRecord("c", record_id, data, "e1", "2026-01-01T00:00:00.000Z")


async def test_a_refused_write_changes_nothing_and_usage_follows_writes(store: Store) -> None:
    records = store.records
    await records.create_collection("t1", "c", "", None, "now")
    await records.create_record("t1", _new("r1", {"a": 1}), QUOTA, None)
    await records.create_record("t1", _new("r2", {"a": 2}), QUOTA, None)
    with pytest.raises(QuotaExceeded):
        await records.create_record("t1", _new("r3", {"a": 3}), QUOTA, None)
    assert await listed_ids(records, "t1", "c") == ["r1", "r2"]
    assert (await records.usage("t1"))[0] == 2
    await records.delete_record("t1", "c", "r1", if_match=None)
    assert (await records.usage("t1"))[0] == 1


async def test_another_tenant_and_a_stale_etag_are_refused(store: Store) -> None:
    records = store.records
    await records.create_collection("t1", "c", "", None, "now")
    await records.create_record("t1", _new("r1", {"a": 1}), QUOTA, None)
    assert await records.get_record("t2", "c", "r1") is None
    with pytest.raises(Missing):
        await records.delete_record("t2", "c", "r1", if_match=None)
    with pytest.raises(VersionMismatch):
        await records.update_record("t1", "c", "r1", lambda d: d, if_match="stale", etag="e2", now="later", quota=QUOTA)
    assert (await records.get_record("t1", "c", "r1")) is not None


async def test_writers_racing_on_one_etag_are_serialized_and_only_one_wins(store: Store) -> None:
    """records plugin: concurrent writers to one record are serialized by `_etag`."""
    records = store.records
    await records.create_collection("t1", "c", "", None, "now")
    await records.create_record("t1", _new("r1", {"n": 0}), QUOTA, None)
    outcomes: list[str] = []

    async def write(n: int) -> None:
        try:
            await records.update_record(
                "t1", "c", "r1", lambda d: {**d, "n": n}, if_match="e1", etag=f"e-{n}", now="later", quota=QUOTA
            )
            outcomes.append("ok")
        except VersionMismatch:
            outcomes.append("mismatch")

    async with anyio.create_task_group() as group:
        for n in range(1, 6):
            group.start_soon(write, n)
    record = await records.get_record("t1", "c", "r1")
    assert sorted(outcomes) == ["mismatch"] * 4 + ["ok"]
    assert record is not None
    assert record.etag == f"e-{record.data['n']}"


async def test_a_write_that_fails_midway_changes_nothing(store: Store) -> None:
    records = store.records
    await records.create_collection("t1", "c", "", None, "now")
    await records.create_record("t1", _new("r1", {"n": 0}), QUOTA, None)

    def broken(data: dict[str, object]) -> dict[str, object]:
        raise RuntimeError("the merge failed")

    with pytest.raises(RuntimeError):
        await records.update_record("t1", "c", "r1", broken, if_match=None, etag="e2", now="later", quota=QUOTA)
    record = await records.get_record("t1", "c", "r1")
    assert record is not None
    assert (record.etag, record.data) == ("e1", {"n": 0})
    assert await records.usage("t1") == (1, len(b'{"n":0}'))


async def test_the_bytes_quota_counts_updates_and_refuses_growth_past_it(store: Store) -> None:
    records = store.records
    small = Quota(max_records=10, max_bytes=40)
    await records.create_collection("t1", "c", "", None, "now")
    await records.create_record("t1", _new("r1", {"t": "x"}), small, None)
    with pytest.raises(QuotaExceeded) as grown:
        await records.update_record(
            "t1", "c", "r1", lambda d: {"t": "x" * 60}, if_match=None, etag="e2", now="later", quota=small
        )
    await records.update_record(
        "t1", "c", "r1", lambda d: {"t": "y"}, if_match=None, etag="e3", now="later", quota=small
    )
    assert (grown.value.metric, grown.value.limit) == ("bytes", 40)


async def test_idempotency_keys_are_forgotten_after_their_retention(store: Store) -> None:
    records = store.records
    await records.create_collection("t1", "c", "", None, "now")
    first = NewRecord("c", "r1", {"a": 1}, "e1", "2026-01-01T00:00:00.000Z")
    await records.create_record("t1", first, QUOTA, Idempotency("k", "h"))
    assert await records.purge_idempotency(datetime(2025, 12, 31, tzinfo=UTC).timestamp()) == 0
    assert await records.purge_idempotency(datetime(2026, 1, 2, tzinfo=UTC).timestamp()) == 1
    again = NewRecord("c", "r2", {"a": 1}, "e2", "2026-01-03T00:00:00.000Z")
    _created, replayed = await records.create_record("t1", again, QUOTA, Idempotency("k", "h"))
    assert replayed is False


async def test_racing_creates_on_two_replicas_never_pass_the_records_quota(backend: Backend) -> None:
    """issue 11: the quota is checked inside the engine's transaction, not read then written in Python."""
    replicas = [(await backend.open()).records, (await backend.open()).records]
    await replicas[0].create_collection("t1", "c", "", None, "now")
    quota = Quota(max_records=10, max_bytes=1_000_000)
    refused = 0

    async def create(index: int) -> None:
        nonlocal refused
        try:
            await replicas[index % 2].create_record("t1", _new(f"r{index}", {"i": index}), quota, None)
        except QuotaExceeded:
            refused += 1

    async with anyio.create_task_group() as group:
        for index in range(40):
            group.start_soon(create, index)
    assert refused == 30
    assert (await replicas[1].usage("t1"))[0] == 10
    assert len(await listed_ids(replicas[0], "t1", "c")) == 10
    collection = await replicas[1].get_collection("t1", "c")
    assert collection is not None
    assert collection.record_count == 10


async def test_a_repeated_idempotency_key_racing_on_two_replicas_creates_one_record(backend: Backend) -> None:
    replicas = [(await backend.open()).records, (await backend.open()).records]
    await replicas[0].create_collection("t1", "c", "", None, "now")
    outcomes: list[bool] = []

    async def create(index: int) -> None:
        _, replayed = await replicas[index % 2].create_record(
            "t1", _new(f"r{index}", {"a": 1}), QUOTA_LARGE, Idempotency("k", "h")
        )
        outcomes.append(replayed)

    async with anyio.create_task_group() as group:
        for index in range(6):
            group.start_soon(create, index)
    assert outcomes.count(False) == 1
    assert len(await listed_ids(replicas[1], "t1", "c")) == 1


async def test_positions_count_within_each_collection_only(store: Store) -> None:
    """A cursor carries a position; positions never reveal what other tenants or collections write."""
    records = store.records
    for tenant in ("t1", "t2"):
        await records.create_collection(tenant, "c", "", None, "now")
    await records.create_collection("t1", "d", "", None, "now")
    for index in range(3):
        await records.create_record("t2", _new(f"x{index}", {}), QUOTA_LARGE, None)
        await records.create_record("t1", _new(f"y{index}", {}), QUOTA_LARGE, None)
    page = await records.list_records("t1", "c", Listing(size=10))
    assert [key.position for _, key in page.items] == [1, 2, 3]
    other = await records.create_record("t1", NewRecord("d", "w", {}, "e", "now"), QUOTA_LARGE, None)
    assert other[0].position == 1


async def test_deleting_a_collection_deletes_its_records_and_gives_back_their_usage(store: Store) -> None:
    records = store.records
    await records.create_collection("t1", "c", "", None, "now")
    await records.create_collection("t1", "keep", "", None, "now")
    for index in range(3):
        await records.create_record("t1", _new(f"r{index}", {"i": index}), QUOTA_LARGE, None)
    await records.create_record("t1", NewRecord("keep", "k", {"i": 9}, "e", "now"), QUOTA_LARGE, None)
    assert await records.delete_collection("t1", "c") == 3
    assert await records.get_collection("t1", "c") is None
    assert (await records.usage("t1"))[0] == 1
    with pytest.raises(Missing):
        await records.delete_collection("t1", "c")
    assert [c.name for c in (await records.list_collections("t1", size=10)).items] == ["keep"]


async def test_mixed_writers_on_two_replicas_never_deadlock_and_keep_counts_exact(backend: Backend) -> None:
    """Creates, deletes and updates racing on one collection from two store instances: every write
    locks rows in one order, so none fails on a deadlock, and usage, the collection's count and
    the listing agree afterwards."""
    replicas = [(await backend.open()).records, (await backend.open()).records]
    await replicas[0].create_collection("t1", "c", "", None, "now")
    for index in range(40):
        await replicas[0].create_record("t1", _new(f"old{index}", {"i": index}), QUOTA_LARGE, None)

    async def create(index: int) -> None:
        await replicas[index % 2].create_record("t1", _new(f"new{index}", {"i": index}), QUOTA_LARGE, None)

    async def delete(index: int) -> None:
        await replicas[(index + 1) % 2].delete_record("t1", "c", f"old{index}", if_match=None)

    async def update(index: int) -> None:
        record_id = f"old{(index + 20) % 40}"
        with contextlib.suppress(Missing):
            await replicas[index % 2].update_record(
                "t1", "c", record_id, lambda d: {**d, "x": 1}, if_match=None, etag="e2", now="later", quota=QUOTA_LARGE
            )

    async with anyio.create_task_group() as group:
        for index in range(40):
            group.start_soon(create, index)
            group.start_soon(delete, index)
            group.start_soon(update, index)
    listed = await listed_ids(replicas[1], "t1", "c")
    collection = await replicas[1].get_collection("t1", "c")
    assert collection is not None
    assert len(listed) == 40
    assert (await replicas[0].usage("t1"))[0] == collection.record_count == 40


async def test_collections_page_by_name_forward_and_back_with_the_tenant_total(store: Store) -> None:
    """MCP-AQL pagination §2: keyset pages in name order (byte order on both engines), flags both ways."""
    records = store.records
    names = ["a-1", "a1", "a_1", "b", "c", "d"]
    for name in reversed(names):
        await records.create_collection("t1", name, "", None, "now")
    await records.create_collection("t2", "other", "", None, "now")
    first = await records.list_collections("t1", size=4)
    rest = await records.list_collections("t1", size=4, cursor=first.items[-1].name)
    back = await records.list_collections("t1", size=2, forward=False, cursor=rest.items[0].name)
    assert [c.name for c in first.items] == names[:4]
    assert (first.has_next, first.has_previous, first.total) == (True, False, 6)
    assert [c.name for c in rest.items] == names[4:]
    assert (rest.has_next, rest.has_previous) == (False, True)
    assert [c.name for c in back.items] == names[2:4]
    assert (back.has_next, back.has_previous) == (True, True)
    last = await records.list_collections("t1", size=2, forward=False)
    assert [c.name for c in last.items] == names[4:]
    assert (last.has_next, last.has_previous) == (False, True)


async def test_a_listing_that_would_scan_more_records_than_the_budget_is_refused_and_a_plain_one_runs(
    backend: Backend,
) -> None:
    """docs/store.md, "Scan budget": counted before the scan, the same on every engine."""
    store = await backend.open(listing_scan_rows=2)
    records = store.records
    await records.create_collection("t1", "c", "", None, "now")
    await records.create_records("t1", "c", [_new(f"r{n}", {"n": n}) for n in range(3)], QUOTA_LARGE)
    heavy = (
        Listing(size=1, sort=("n",)),
        Listing(size=1, terms=("x",)),
        Listing(size=1, conditions=(Condition(("n",), "eq", 1),)),
    )
    for listing in heavy:
        with pytest.raises(ScanTooLarge) as refused:
            await records.list_records("t1", "c", listing)
        assert (refused.value.limit, refused.value.rows) == (2, 3)
    page = await records.list_records("t1", "c", Listing(size=1))
    assert [record.id for record, _ in page.items] == ["r0"]
    assert page.total == 3


async def test_a_listing_of_exactly_the_scan_budget_runs(backend: Backend) -> None:
    store = await backend.open(listing_scan_rows=3)
    records = store.records
    await records.create_collection("t1", "c", "", None, "now")
    await records.create_records("t1", "c", [_new(f"r{n}", {"n": n}) for n in range(3)], QUOTA_LARGE)
    assert await listed_ids(records, "t1", "c", sort=("n",), descending=True) == ["r2", "r1", "r0"]
