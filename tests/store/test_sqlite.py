import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from aql_mcp.exceptions import StoreError, UpstreamUnavailable
from aql_mcp.store.base import SessionRecord
from aql_mcp.store.sqlite import MIGRATIONS, SqliteStore, migrate

pytestmark = pytest.mark.anyio


def record(session_id: str, *, last_seen: float = 100.0, owner: str = "owner-a") -> SessionRecord:
    return SessionRecord(
        id=session_id,
        owner=owner,
        protocol_version="2025-11-25",
        client_info={"name": "client", "version": "1"},
        client_capabilities={"sampling": {}},
        log_level="info",
        created_at=last_seen,
        last_seen=last_seen,
    )


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "state" / "store.sqlite3"


@pytest.fixture
async def store(db_path: Path) -> AsyncIterator[SqliteStore]:
    opened = SqliteStore(db_path)
    await opened.open()
    yield opened
    await opened.close()


def schema_versions(path: Path) -> list[int]:
    with sqlite3.connect(path) as db:
        return [row[0] for row in db.execute("SELECT version FROM schema_version ORDER BY version")]


async def seqs(store: SqliteStore, session_id: str, stream_id: str, after: int = 0) -> list[int]:
    return [event.seq for event in await store.events_after(session_id, stream_id, after)]


async def test_open_applies_every_migration_in_order(store: SqliteStore, db_path: Path) -> None:
    assert schema_versions(db_path) == list(range(1, len(MIGRATIONS) + 1))


async def test_reopening_does_not_migrate_again_and_keeps_the_data(store: SqliteStore, db_path: Path) -> None:
    assert await store.create_session(record("s1"), max_open=10)
    await store.append_event("s1", "g", 1, b'{"a":1}', 100.0)
    await store.close()
    reopened = SqliteStore(db_path)
    await reopened.open()
    try:
        assert schema_versions(db_path) == list(range(1, len(MIGRATIONS) + 1))
        assert await reopened.get_session("s1") == record("s1")
        assert await seqs(reopened, "s1", "g") == [1]
    finally:
        await reopened.close()


def test_migrate_is_idempotent() -> None:
    db = sqlite3.connect(":memory:", isolation_level=None)
    try:
        assert migrate(db) == len(MIGRATIONS)
        assert migrate(db) == len(MIGRATIONS)
        versions = [row[0] for row in db.execute("SELECT version FROM schema_version")]
        assert versions == list(range(1, len(MIGRATIONS) + 1))
    finally:
        db.close()


async def test_create_session_stops_at_max_open(store: SqliteStore) -> None:
    assert await store.create_session(record("s1"), max_open=2)
    assert await store.create_session(record("s2"), max_open=2)
    assert not await store.create_session(record("s3"), max_open=2)
    assert await store.count_sessions() == 2
    assert await store.get_session("s3") is None


async def test_cap_holds_across_two_connections_to_one_file(store: SqliteStore, db_path: Path) -> None:
    other = SqliteStore(db_path)
    await other.open()
    try:
        assert await store.create_session(record("s1"), max_open=2)
        assert await other.create_session(record("s2"), max_open=2)
        assert not await store.create_session(record("s3"), max_open=2)
        assert not await other.create_session(record("s4"), max_open=2)
        assert await other.count_sessions() == 2
    finally:
        await other.close()


async def test_get_session_returns_what_was_stored(store: SqliteStore) -> None:
    await store.create_session(record("s1"), max_open=10)
    assert await store.get_session("s1") == record("s1")
    assert await store.get_session("missing") is None


async def test_touch_session_updates_last_seen(store: SqliteStore) -> None:
    await store.create_session(record("s1", last_seen=100.0), max_open=10)
    await store.touch_session("s1", 250.0)
    stored = await store.get_session("s1")
    assert stored is not None
    assert stored.last_seen == 250.0
    assert stored.created_at == 100.0


async def test_set_log_level_is_stored(store: SqliteStore) -> None:
    await store.create_session(record("s1"), max_open=10)
    await store.set_log_level("s1", "debug")
    stored = await store.get_session("s1")
    assert stored is not None
    assert stored.log_level == "debug"


async def test_delete_session_removes_it_and_its_events(store: SqliteStore) -> None:
    await store.create_session(record("s1"), max_open=10)
    await store.create_session(record("s2"), max_open=10)
    await store.append_event("s1", "g", 1, b"one", 100.0)
    await store.append_event("s2", "g", 1, b"two", 100.0)
    assert await store.delete_session("s1")
    assert await store.get_session("s1") is None
    assert await seqs(store, "s1", "g") == []
    assert await seqs(store, "s2", "g") == [1]
    assert not await store.delete_session("s1")


async def test_expire_sessions_returns_the_idle_ids_and_deletes_their_events(store: SqliteStore) -> None:
    await store.create_session(record("idle-1", last_seen=100.0), max_open=10)
    await store.create_session(record("idle-2", last_seen=150.0), max_open=10)
    await store.create_session(record("active", last_seen=300.0), max_open=10)
    await store.append_event("idle-1", "g", 1, b"x", 100.0)
    await store.append_event("active", "g", 1, b"y", 300.0)
    assert sorted(await store.expire_sessions(200.0)) == ["idle-1", "idle-2"]
    assert await store.get_session("idle-1") is None
    assert await store.get_session("active") is not None
    assert await seqs(store, "idle-1", "g") == []
    assert await seqs(store, "active", "g") == [1]
    assert await store.expire_sessions(200.0) == []


async def test_events_after_returns_later_events_in_order(store: SqliteStore) -> None:
    await store.create_session(record("s1"), max_open=10)
    for seq in (3, 1, 2):
        await store.append_event("s1", "a", seq, f"event-{seq}".encode(), 100.0)
    events = await store.events_after("s1", "a", 0)
    assert [(e.seq, e.data) for e in events] == [(1, b"event-1"), (2, b"event-2"), (3, b"event-3")]
    assert await seqs(store, "s1", "a", after=1) == [2, 3]
    assert await seqs(store, "s1", "a", after=3) == []


async def test_events_are_kept_apart_by_stream_and_session(store: SqliteStore) -> None:
    await store.create_session(record("s1"), max_open=10)
    await store.create_session(record("s2"), max_open=10)
    await store.append_event("s1", "a", 1, b"s1-a", 100.0)
    await store.append_event("s1", "b", 1, b"s1-b", 100.0)
    await store.append_event("s2", "a", 1, b"s2-a", 100.0)
    assert [e.data for e in await store.events_after("s1", "a", 0)] == [b"s1-a"]
    assert [e.data for e in await store.events_after("s1", "b", 0)] == [b"s1-b"]
    assert [e.data for e in await store.events_after("s2", "a", 0)] == [b"s2-a"]


async def test_event_for_an_unknown_session_is_refused(store: SqliteStore) -> None:
    with pytest.raises(StoreError):
        await store.append_event("missing", "a", 1, b"x", 100.0)


async def test_purge_events_removes_only_older_events(store: SqliteStore) -> None:
    await store.create_session(record("s1"), max_open=10)
    await store.append_event("s1", "a", 1, b"old", 100.0)
    await store.append_event("s1", "a", 2, b"older", 50.0)
    await store.append_event("s1", "a", 3, b"new", 300.0)
    assert await store.purge_events(200.0) == 2
    assert await seqs(store, "s1", "a") == [3]
    assert await store.get_session("s1") is not None


async def test_store_is_ready_only_while_open(db_path: Path) -> None:
    store = SqliteStore(db_path)
    assert not await store.is_ready()
    await store.open()
    assert await store.is_ready()
    await store.close()
    assert not await store.is_ready()


async def test_closed_store_raises_upstream_unavailable(db_path: Path) -> None:
    store = SqliteStore(db_path)
    await store.open()
    await store.close()
    with pytest.raises(UpstreamUnavailable):
        await store.get_session("s1")


async def test_duplicate_session_id_changes_nothing(store: SqliteStore) -> None:
    await store.create_session(record("s1", owner="owner-a"), max_open=10)
    with pytest.raises(StoreError):
        await store.create_session(record("s1", owner="owner-b"), max_open=10)
    assert await store.count_sessions() == 1
    stored = await store.get_session("s1")
    assert stored is not None
    assert stored.owner == "owner-a"
    assert await store.create_session(record("s2"), max_open=10)
    assert await store.count_sessions() == 2


async def test_delete_session_is_visible_to_another_connection(store: SqliteStore, db_path: Path) -> None:
    await store.create_session(record("s1"), max_open=10)
    await store.append_event("s1", "g", 1, b"x", 100.0)
    assert await store.delete_session("s1")
    other = SqliteStore(db_path)
    await other.open()
    try:
        assert await other.get_session("s1") is None
        assert await seqs(other, "s1", "g") == []
    finally:
        await other.close()


def fail_deleting(path: Path, session_id: str) -> None:
    """Fault injection from outside: the engine aborts deleting this one session row."""
    with sqlite3.connect(path) as db:
        db.execute(
            f"CREATE TRIGGER fail_delete BEFORE DELETE ON sessions WHEN old.id = '{session_id}' "
            "BEGIN SELECT RAISE(ABORT, 'injected failure'); END"
        )


async def test_failed_delete_keeps_the_session_and_its_events(store: SqliteStore, db_path: Path) -> None:
    await store.create_session(record("s1"), max_open=10)
    await store.append_event("s1", "g", 1, b"x", 100.0)
    fail_deleting(db_path, "s1")
    with pytest.raises(StoreError):
        await store.delete_session("s1")
    assert await store.get_session("s1") is not None
    assert await seqs(store, "s1", "g") == [1]


async def test_failed_expiry_keeps_every_session_and_event(store: SqliteStore, db_path: Path) -> None:
    for session_id in ("s1", "s2"):
        await store.create_session(record(session_id, last_seen=100.0), max_open=10)
        await store.append_event(session_id, "g", 1, b"x", 100.0)
    fail_deleting(db_path, "s2")
    with pytest.raises(StoreError):
        await store.expire_sessions(200.0)
    assert await store.count_sessions() == 2
    assert await seqs(store, "s1", "g") == [1]
    assert await seqs(store, "s2", "g") == [1]
    assert await store.is_ready()
