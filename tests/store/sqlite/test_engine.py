"""What only the SQLite engine has: its migrations, its threads, and faults injected into its file."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from aql_mcp.exceptions import StoreError
from aql_mcp.store.migration import SchemaTooNew, compatible_from
from aql_mcp.store.sqlite.engine import _enter_wal
from aql_mcp.store.sqlite.schema import MIGRATIONS, migrate
from aql_mcp.store.sqlite.store import SqliteStore
from tests.support.plugin_store import with_built_ins
from tests.support.schema_0_2 import SQLITE as OLD_SQLITE
from tests.support.store import admit, record, seqs

pytestmark = pytest.mark.anyio
# Counting to this in a recursive query keeps a reader busy for many seconds.
ENDLESS = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000000000) SELECT max(i) FROM n"


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "state" / "store.sqlite3"


@pytest.fixture
async def sqlite(db_path: Path) -> AsyncIterator[SqliteStore]:
    opened = SqliteStore(db_path, readers=1)
    await opened.open()
    yield opened
    await opened.close()


def schema_versions(path: Path) -> list[int]:
    with sqlite3.connect(path) as db:
        return [row[0] for row in db.execute("SELECT version FROM schema_version ORDER BY version")]


async def test_open_applies_every_migration_in_order(sqlite: SqliteStore, db_path: Path) -> None:
    assert schema_versions(db_path) == list(range(1, len(MIGRATIONS) + 1))


async def test_reopening_does_not_migrate_again_and_keeps_the_data(sqlite: SqliteStore, db_path: Path) -> None:
    assert await admit(sqlite, record("s1")) == "created"
    await sqlite.append_event("s1", "g", b'{"a":1}', 100.0)
    await sqlite.close()
    reopened = SqliteStore(db_path)
    await reopened.open()
    try:
        assert schema_versions(db_path) == list(range(1, len(MIGRATIONS) + 1))
        assert await reopened.get_session("s1") == record("s1")
        assert await seqs(reopened, "s1", "g") == [1]
    finally:
        await reopened.close()


def add_newer_migration(path: Path, *, additive: bool) -> int:
    """What a newer release leaves behind: one more row in schema_version, additive or breaking."""
    newer = len(MIGRATIONS) + 1
    with sqlite3.connect(path) as db:
        needs = compatible_from(MIGRATIONS, len(MIGRATIONS)) if additive else newer
        db.execute("INSERT INTO schema_version (version, compatible_from) VALUES (?, ?)", (newer, needs))
    return newer


async def test_a_release_runs_on_a_store_a_newer_release_migrated_additively(
    sqlite: SqliteStore, db_path: Path
) -> None:
    """A rollback (or an old replica in a rolling update) over an additive migration keeps working."""
    assert await admit(sqlite, record("s1")) == "created"
    await sqlite.close()
    newer = add_newer_migration(db_path, additive=True)
    older = SqliteStore(db_path)
    await older.open()
    try:
        assert await older.get_session("s1") == record("s1")
        assert await admit(older, record("s2")) == "created"
    finally:
        await older.close()
    assert schema_versions(db_path) == list(range(1, newer + 1))


async def test_a_store_a_newer_release_migrated_with_a_breaking_change_is_refused_untouched(
    sqlite: SqliteStore, db_path: Path
) -> None:
    """A rollback over a breaking migration: the older release must not read and write a schema it does not know."""
    assert await admit(sqlite, record("s1")) == "created"
    await sqlite.close()
    newer = add_newer_migration(db_path, additive=False)
    older = SqliteStore(db_path)
    with pytest.raises(SchemaTooNew) as refused:
        await older.open()
    await older.close()
    assert (refused.value.found, refused.value.needs, refused.value.known) == (newer, newer, len(MIGRATIONS))
    assert schema_versions(db_path) == list(range(1, newer + 1))
    with sqlite3.connect(db_path) as db:
        assert db.execute("SELECT count(*) FROM sessions").fetchone()[0] == 1


async def test_a_newer_version_that_does_not_say_what_it_needs_is_refused(sqlite: SqliteStore, db_path: Path) -> None:
    await sqlite.close()
    with sqlite3.connect(db_path) as db:
        db.execute("INSERT INTO schema_version (version) VALUES (?)", (len(MIGRATIONS) + 1,))
    older = SqliteStore(db_path)
    with pytest.raises(SchemaTooNew):
        await older.open()
    await older.close()


async def test_each_version_records_the_oldest_release_that_runs_on_it(sqlite: SqliteStore, db_path: Path) -> None:
    """Migration 1 is the base and 5 repositions every record (breaking); the others are additive."""
    with sqlite3.connect(db_path) as db:
        rows = db.execute("SELECT version, compatible_from FROM schema_version ORDER BY version").fetchall()
    assert rows == [(v, 1 if v < 5 else 5) for v in range(1, len(MIGRATIONS) + 1)]


async def test_an_online_backup_of_a_store_in_use_opens_with_its_data(sqlite: SqliteStore, db_path: Path) -> None:
    """docs/operations.md: the backup API copies the file while the service keeps its connections."""
    assert await admit(sqlite, record("s1")) == "created"
    copy = db_path.with_name("backup.sqlite3")
    source, target = sqlite3.connect(db_path), sqlite3.connect(copy)
    with source, target:
        source.backup(target)
        assert target.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    source.close()
    target.close()
    assert await admit(sqlite, record("s2")) == "created"  # the service kept writing
    restored = SqliteStore(copy)
    await restored.open()
    try:
        assert await restored.get_session("s1") == record("s1")
        assert await restored.get_session("s2") is None
    finally:
        await restored.close()


def test_migrate_is_idempotent() -> None:
    db = sqlite3.connect(":memory:", isolation_level=None)
    try:
        assert migrate(db) == len(MIGRATIONS)
        assert migrate(db) == len(MIGRATIONS)
        versions = [row[0] for row in db.execute("SELECT version FROM schema_version")]
        assert versions == list(range(1, len(MIGRATIONS) + 1))
    finally:
        db.close()


async def test_a_store_of_the_previous_release_is_upgraded_in_place(db_path: Path) -> None:
    """Schema 4 kept a global record counter and no stream counters: positions become per
    collection, record counts and event numbers carry over."""
    db_path.parent.mkdir(parents=True)
    db = sqlite3.connect(db_path, isolation_level=None)
    db.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
    for version, (script, _) in enumerate(OLD_SQLITE[:4], start=1):
        for statement in (s for s in script.split(";") if s.strip()):
            db.execute(statement)
        db.execute("INSERT INTO schema_version VALUES (?)", (version,))
    db.execute("INSERT INTO record_collections VALUES ('t', 'c', '', NULL, 'now')")
    for seq, record_id in ((7, "a"), (9, "b")):
        db.execute("INSERT INTO records VALUES (?, 't', 'c', ?, '{\"n\": 1}', 8, 'e', 'now', 'now')", (seq, record_id))
    db.execute("INSERT INTO sessions VALUES ('s1', 'o', 'v', '{}', '{}', 'info', 1, 1)")
    db.execute("INSERT INTO events VALUES ('s1', 'g', 5, 'x', 1)")
    db.close()
    store = with_built_ins(SqliteStore(db_path))
    await store.open()
    try:
        collection = await store.records.get_collection("t", "c")
        assert collection is not None
        assert collection.record_count == 2
        assert await store.append_event("s1", "g", b"y", 2.0) == 6
        record_b = await store.records.get_record("t", "c", "b")
        assert record_b is not None
        assert record_b.position == 9
    finally:
        await store.close()


async def test_a_slow_read_leaves_the_event_loop_free(sqlite: SqliteStore) -> None:
    """issue 11: a statement runs on a reader thread; the loop keeps serving while it runs."""
    ticks = 0
    done = anyio.Event()

    async def tick() -> None:
        nonlocal ticks
        while not done.is_set():
            ticks += 1
            await anyio.lowlevel.checkpoint()

    slow = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000000) SELECT max(i) FROM n"
    async with anyio.create_task_group() as group:
        group.start_soon(tick)
        assert await sqlite.engine.read(lambda db: db.execute(slow).fetchone()[0]) == 3000000
        done.set()
    assert ticks > 100


async def test_a_cancelled_read_is_interrupted_and_frees_its_thread(sqlite: SqliteStore) -> None:
    """With one reader thread, the next read only runs if the cancelled statement really stopped."""
    with anyio.move_on_after(0.2):
        await sqlite.engine.read(lambda db: db.execute(ENDLESS).fetchone())
    with anyio.fail_after(20):
        assert await sqlite.engine.read(lambda db: db.execute("SELECT 7").fetchone()[0]) == 7


def fail_deleting(path: Path, session_id: str) -> None:
    """Fault injection from outside: the engine aborts deleting this one session row."""
    with sqlite3.connect(path) as db:
        db.execute(
            f"CREATE TRIGGER fail_delete BEFORE DELETE ON sessions WHEN old.id = '{session_id}' "
            "BEGIN SELECT RAISE(ABORT, 'injected failure'); END"
        )


async def test_failed_delete_keeps_the_session_and_its_events(sqlite: SqliteStore, db_path: Path) -> None:
    await admit(sqlite, record("s1"))
    await sqlite.append_event("s1", "g", b"x", 100.0)
    fail_deleting(db_path, "s1")
    with pytest.raises(StoreError):
        await sqlite.delete_session("s1")
    assert await sqlite.get_session("s1") is not None
    assert await seqs(sqlite, "s1", "g") == [1]


async def test_failed_expiry_keeps_every_session_and_event(sqlite: SqliteStore, db_path: Path) -> None:
    for session_id in ("s1", "s2"):
        await admit(sqlite, record(session_id, last_seen=100.0))
        await sqlite.append_event(session_id, "g", b"x", 100.0)
    fail_deleting(db_path, "s2")
    with pytest.raises(StoreError):
        await sqlite.expire_sessions(200.0)
    assert await sqlite.count_sessions() == 2
    assert await seqs(sqlite, "s1", "g") == [1]
    assert await seqs(sqlite, "s2", "g") == [1]
    assert await sqlite.is_ready()


async def test_a_full_database_fails_writes_whole_and_writes_resume_when_room_is_made(db_path: Path) -> None:
    """Issue 12, a full disk as SQLite meets it (SQLITE_FULL; `max_page_count` raises it the same
    way without root): each failed write changes nothing, the next one first gives back the log's
    space, and writes resume once there is room, with no restart."""
    store = SqliteStore(db_path, readers=1)
    await store.open()
    try:
        await admit(store, record("s1"))
        pages = await store.engine.write(lambda db: db.execute("PRAGMA page_count").fetchone()[0])
        await store.engine.write(lambda db: db.execute(f"PRAGMA max_page_count = {pages + 4}"))
        written = await append_until_refused(store)
        assert await seqs(store, "s1", "g") == list(range(1, written + 1))
        assert await store.stream_position("s1", "g") == (written, False)
        await store.engine.write(lambda db: db.execute("PRAGMA max_page_count = 1073741823"))
        assert await store.append_event("s1", "g", b"y", 100.0) == written + 1
        assert wal_bytes(db_path) < 64 * 1024
        assert await store.is_writable()
    finally:
        await store.close()


async def test_the_write_ahead_log_gives_back_what_it_grew_by(db_path: Path) -> None:
    """A reader holding an old snapshot keeps checkpoints from finishing and the log grows; once it
    is gone the log is cut back to `wal_limit_bytes`, not kept at its largest for good."""
    store = SqliteStore(db_path, readers=1, wal_limit_bytes=65_536)
    await store.open()
    try:
        await admit(store, record("s1"))
        reader = sqlite3.connect(db_path, isolation_level=None)
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM sessions").fetchone()
        for _ in range(60):
            await store.append_event("s1", "g", b"x" * 100_000, 100.0)
        grown = wal_bytes(db_path)
        reader.execute("COMMIT")
        reader.close()
        await store.append_event("s1", "g", b"y", 100.0)  # checkpoints the whole log at its commit
        await store.append_event("s1", "g", b"z", 100.0)  # starts the log over, cut to the limit
        assert grown > 4 * 1024 * 1024
        assert wal_bytes(db_path) <= 65_536 + 2 * 4_120
    finally:
        await store.close()


async def test_writes_wait_for_an_outside_lock_no_longer_than_the_lock_timeout(db_path: Path) -> None:
    store = SqliteStore(db_path, readers=1, lock_timeout=0.2)
    await store.open()
    try:
        outsider = sqlite3.connect(db_path, isolation_level=None, timeout=0)
        outsider.execute("BEGIN EXCLUSIVE")
        try:
            with anyio.fail_after(10), pytest.raises(StoreError):
                await admit(store, record("s1"))
            assert not await store.is_writable()
            assert await store.count_sessions() == 0
        finally:
            outsider.execute("ROLLBACK")
            outsider.close()
        assert await admit(store, record("s1")) == "created"
    finally:
        await store.close()


def wal_bytes(db_path: Path) -> int:
    wal = db_path.with_name(db_path.name + "-wal")
    return wal.stat().st_size if wal.exists() else 0


async def append_until_refused(store: SqliteStore) -> int:
    """Append large events until the store refuses one with `StoreError`; return how many it took."""
    for written in range(100):
        try:
            await store.append_event("s1", "g", b"x" * 20_000, 100.0)
        except StoreError:
            return written
    raise AssertionError("the full database took every write")


def test_connections_racing_to_switch_a_new_file_to_wal_all_succeed(tmp_path: Path) -> None:
    """SQLite answers "database is locked" at once, without its busy wait, to one of two connections
    switching a new file to WAL together (on this machine about one race in twelve fails): replicas
    or a rolling update starting on a new file would fail their start. The switch waits its turn."""
    failures: list[str] = []

    def switch(path: Path) -> None:
        db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        try:
            _enter_wal(db, 5.0)
        except sqlite3.OperationalError as exc:
            failures.append(str(exc))
        finally:
            db.close()

    for attempt in range(100):
        path = tmp_path / f"race-{attempt}.sqlite3"
        racers = [threading.Thread(target=switch, args=(path,)) for _ in range(6)]
        for racer in racers:
            racer.start()
        for racer in racers:
            racer.join()
    assert failures == []
