"""SqliteRecordStore: tenant isolation, quotas inside the write transaction, etag checks, usage."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import anyio
import pytest

from aql_mcp.store.records import Idempotency, Missing, NewRecord, Quota, QuotaExceeded, VersionMismatch
from aql_mcp.store.sqlite import SqliteStore

pytestmark = pytest.mark.anyio
QUOTA = Quota(max_records=2, max_bytes=10_000)


async def _opened(tmp_path: Path) -> SqliteStore:
    store = SqliteStore(tmp_path / "s.sqlite3")
    await store.open()
    return store


def _new(record_id: str, data: dict[str, object]) -> NewRecord:
    return NewRecord("c", record_id, data, "e1", "2026-01-01T00:00:00.000Z")


async def test_a_refused_write_changes_nothing_and_usage_follows_writes(tmp_path: Path) -> None:
    owner = await _opened(tmp_path)
    store = owner.records
    await store.create_collection("t1", "c", "", None, "now")
    await store.create_record("t1", _new("r1", {"a": 1}), QUOTA, None)
    await store.create_record("t1", _new("r2", {"a": 2}), QUOTA, None)
    with pytest.raises(QuotaExceeded):
        await store.create_record("t1", _new("r3", {"a": 3}), QUOTA, None)
    assert [r.id for r in await store.scan_records("t1", "c")] == ["r1", "r2"]
    assert (await store.usage("t1"))[0] == 2
    await store.delete_record("t1", "c", "r1", if_match=None)
    assert (await store.usage("t1"))[0] == 1
    await owner.close()


async def test_another_tenant_and_a_stale_etag_are_refused(tmp_path: Path) -> None:
    owner = await _opened(tmp_path)
    store = owner.records
    await store.create_collection("t1", "c", "", None, "now")
    await store.create_record("t1", _new("r1", {"a": 1}), QUOTA, None)
    assert await store.get_record("t2", "c", "r1") is None
    with pytest.raises(Missing):
        await store.delete_record("t2", "c", "r1", if_match=None)
    with pytest.raises(VersionMismatch):
        await store.update_record("t1", "c", "r1", lambda d: d, if_match="stale", etag="e2", now="later", quota=QUOTA)
    assert (await store.get_record("t1", "c", "r1")) is not None
    await owner.close()


async def test_writers_racing_on_one_etag_are_serialized_and_only_one_wins(tmp_path: Path) -> None:
    """records plugin: concurrent writers to one record are serialized by `_etag`."""
    owner = await _opened(tmp_path)
    store = owner.records
    await store.create_collection("t1", "c", "", None, "now")
    await store.create_record("t1", _new("r1", {"n": 0}), QUOTA, None)
    outcomes: list[str] = []

    async def write(n: int) -> None:
        try:
            await store.update_record(
                "t1", "c", "r1", lambda d: {**d, "n": n}, if_match="e1", etag=f"e-{n}", now="later", quota=QUOTA
            )
            outcomes.append("ok")
        except VersionMismatch:
            outcomes.append("mismatch")

    async with anyio.create_task_group() as group:
        for n in range(1, 6):
            group.start_soon(write, n)
    record = await store.get_record("t1", "c", "r1")
    await owner.close()
    assert sorted(outcomes) == ["mismatch"] * 4 + ["ok"]
    assert record is not None
    assert record.etag == f"e-{record.data['n']}"


async def test_a_write_that_fails_midway_changes_nothing(tmp_path: Path) -> None:
    owner = await _opened(tmp_path)
    store = owner.records
    await store.create_collection("t1", "c", "", None, "now")
    await store.create_record("t1", _new("r1", {"n": 0}), QUOTA, None)

    def broken(data: dict[str, object]) -> dict[str, object]:
        raise RuntimeError("the merge failed")

    with pytest.raises(RuntimeError):
        await store.update_record("t1", "c", "r1", broken, if_match=None, etag="e2", now="later", quota=QUOTA)
    record = await store.get_record("t1", "c", "r1")
    assert record is not None
    assert (record.etag, record.data) == ("e1", {"n": 0})
    assert await store.usage("t1") == (1, len(b'{"n":0}'))
    await owner.close()


async def test_the_bytes_quota_counts_updates_and_refuses_growth_past_it(tmp_path: Path) -> None:
    owner = await _opened(tmp_path)
    store = owner.records
    small = Quota(max_records=10, max_bytes=40)
    await store.create_collection("t1", "c", "", None, "now")
    await store.create_record("t1", _new("r1", {"t": "x"}), small, None)
    with pytest.raises(QuotaExceeded) as grown:
        await store.update_record(
            "t1", "c", "r1", lambda d: {"t": "x" * 60}, if_match=None, etag="e2", now="later", quota=small
        )
    await store.update_record("t1", "c", "r1", lambda d: {"t": "y"}, if_match=None, etag="e3", now="later", quota=small)
    await owner.close()
    assert (grown.value.metric, grown.value.limit) == ("bytes", 40)


async def test_idempotency_keys_are_forgotten_after_their_retention(tmp_path: Path) -> None:
    owner = await _opened(tmp_path)
    store = owner.records
    await store.create_collection("t1", "c", "", None, "now")
    first = NewRecord("c", "r1", {"a": 1}, "e1", "2026-01-01T00:00:00.000Z")
    await store.create_record("t1", first, QUOTA, Idempotency("k", "h"))
    assert await store.purge_idempotency(datetime(2025, 12, 31, tzinfo=UTC).timestamp()) == 0
    assert await store.purge_idempotency(datetime(2026, 1, 2, tzinfo=UTC).timestamp()) == 1
    again = NewRecord("c", "r2", {"a": 1}, "e2", "2026-01-03T00:00:00.000Z")
    _created, replayed = await store.create_record("t1", again, QUOTA, Idempotency("k", "h"))
    await owner.close()
    assert replayed is False
