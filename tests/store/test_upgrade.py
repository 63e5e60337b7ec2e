"""A store written before plugins owned their tables upgrades in place, on both engines: every row
of every table kept and readable through the service's own APIs (the store's methods, the plugins'
facets), the built-ins' tables adopted rather than created again, and the schema it ends with
exactly a fresh store's (docs/store.md, "A plugin's own tables")."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from aql_mcp.plugins.records.store import Idempotency, NewRecord, Quota
from tests.support.engines import Backend, backend_for
from tests.support.old_store import (
    NOW,
    RESPONSE,
    WHEN,
    build_postgres,
    build_sqlite,
    postgres_dump,
    postgres_schema,
    sqlite_dump,
    sqlite_schema,
)
from tests.support.schema_0_2 import POSTGRES, RELEASE_0_2_0_POSTGRES, RELEASE_0_2_0_SQLITE, SQLITE

pytestmark = pytest.mark.anyio
# The steps of each engine's old schema a test starts from: release 0.2.0 as tagged, and main at the hand-off.
STEPS = {"sqlite": (RELEASE_0_2_0_SQLITE, len(SQLITE)), "postgres": (RELEASE_0_2_0_POSTGRES, len(POSTGRES))}


@pytest.fixture
async def fresh(request: pytest.FixtureRequest, backend: Backend, tmp_path: Path) -> AsyncIterator[Backend]:
    """A second, empty database of the same engine, for a store made fresh by today's code."""
    server = request.getfixturevalue("postgres_server") if backend.engine == "postgres" else None
    async for opened in backend_for(backend.engine, tmp_path / "fresh", server):
        yield opened


async def build(backend: Backend, steps: int) -> None:
    if backend.engine == "sqlite":
        build_sqlite(backend, steps)
    else:
        await build_postgres(backend, steps)


async def dump(backend: Backend) -> dict[str, list[tuple[Any, ...]]]:
    return sqlite_dump(backend) if backend.engine == "sqlite" else await postgres_dump(backend)


async def schema(backend: Backend) -> list[tuple[Any, ...]]:
    return sqlite_schema(backend) if backend.engine == "sqlite" else await postgres_schema(backend)


async def plugin_versions(store: Any) -> list[tuple[str, int, int]]:
    if hasattr(store.engine, "write"):
        rows = await store.engine.read(lambda db: db.execute("SELECT * FROM plugin_schema").fetchall())
    else:
        rows = await store.engine.fetch("SELECT plugin, version, compatible_from FROM plugin_schema")
    return sorted(tuple(row) for row in rows)


@pytest.mark.parametrize("release", [0, 1], ids=["release-0.2.0", "hand-off"])
async def test_every_row_of_an_old_store_is_kept_and_its_tables_are_adopted(
    backend: Backend, fresh: Backend, release: int
) -> None:
    steps = STEPS[backend.engine][release]
    await build(backend, steps)
    before = await dump(backend)
    store = await backend.open()
    after = await dump(backend)
    # Every row of every table the old store had, column for column; new tables start empty.
    assert {table: rows for table, rows in after.items() if table in before} == before
    assert all(rows == [] for table, rows in after.items() if table not in before)
    assert all(rows for rows in before.values())
    await read_back(store, has_parts="execution_parts" in before, newer="revoked_tokens" in before)
    fresh_store = await fresh.open()
    assert await schema(backend) == await schema(fresh)
    assert await plugin_versions(store) == await plugin_versions(fresh_store)


async def read_back(store: Any, *, has_parts: bool, newer: bool) -> None:
    """The rows of tests/support/old_store.py through the core's methods and the plugins' facets."""
    session = await store.get_session("s1")
    assert session is not None
    assert (session.owner, session.client_info) == ("alice", {"name": "client", "version": "1"})
    assert [event.seq for event in await store.events_after("s1", "g", 0)] == [5]
    assert await store.stream_position("s1", "g") == (5, False)
    assert await store.subscribers("file:///a") == ["s1"]
    grant = await store.confirmations.get_grant("h1")
    assert grant is not None
    assert grant.operation == "create_record"
    task = await store.tasks.load_task("t1")
    assert task is not None
    assert task.status == "working"
    if newer:
        assert await store.revocations.is_revoked("rt")
        assert (await store.principals.identities(["alice"]))["alice"].subject == "alice@example.com"
    await read_records(store)
    execution = await store.executions.load("e1")
    assert execution is not None
    assert (execution.status, execution.principal, execution.result) == ("completed", "alice", {"parts": 1})
    if has_parts:
        assert await store.executions.output_part("e1", "t", 0) == b'{"n": 1}\n'
    await read_safety(store)


async def read_records(store: Any) -> None:
    collection = await store.records.get_collection("t", "c")
    assert collection is not None
    assert (collection.description, collection.record_count) == ("notes", 1)
    record = await store.records.get_record("t", "c", "a")
    assert record is not None
    assert (record.data, record.position) == ({"n": 1}, 2)
    assert await store.records.usage("t") == (1, 8)
    again = NewRecord("c", "other", {"n": 2}, "e2", WHEN)
    replayed, repeated = await store.records.create_record("t", again, Quota(10, 1000), Idempotency("k", "rh"))
    assert repeated
    assert (replayed.id, replayed.data) == (RESPONSE["id"], RESPONSE["data"])
    # Positions go on from the old counter.
    created, _ = await store.records.create_record("t", again, Quota(10, 1000), None)
    assert created.position == 3


async def read_safety(store: Any) -> None:
    safety = store.safety
    run = await safety.get_run("run1")
    assert run is not None
    assert (run.principal, run.settings) == ("alice", {"maxAutonomousSteps": 5})
    challenge = await safety.get_challenge("ch1")
    assert challenge is not None
    assert challenge.code == "123456"
    block = await safety.get_block("alice")
    assert block is not None
    assert block.challenge_id == "ch1"
    approval = await safety.get_approval("ap1")
    assert approval is not None
    assert approval.token_hash == "th"
    assert [notice.ref for notice in await safety.take_notices("alice", NOW)] == ["ap1"]
    assert await safety.failures("alice", 0.0) == 1
    assert [event.kind for event in (await safety.overview(NOW)).events] == ["run_started"]


async def test_a_second_start_after_the_upgrade_changes_nothing(backend: Backend) -> None:
    """The legacy row is written once: a restart neither adopts nor migrates again."""
    await build(backend, STEPS[backend.engine][1])
    store = await backend.open()
    versions = await plugin_versions(store)
    await store.close()
    backend.opened.remove(store)
    before = await dump(backend)
    again = await backend.open()
    assert await plugin_versions(again) == versions
    assert await dump(backend) == before
