"""A plugin's own tables (store/plugin_tables.py, docs/store.md "A plugin's own tables"), on both
engines: declared through `aql_mcp.plugin`, migrated when the store opens, versioned per plugin
with the core's compatibility rule."""

from __future__ import annotations

import asyncio
import sqlite3
from typing import Any

import asyncpg
import pytest

from aql_mcp.exceptions import ConfigError
from aql_mcp.plugin import Migration, SchemaTooNew
from aql_mcp.plugin_host.loader import load_plugins
from aql_mcp.protocol.primitives import Registry
from aql_mcp.settings import Settings
from aql_mcp.store.base import Store
from aql_mcp.store.factory import SQLITE_FILE, open_store
from aql_mcp.store.migration import adopted
from tests.support.engines import Backend
from tests.support.notes_tables import NOTES, POSTGRES_2, SQLITE_2, NotesPlugin, notes_tables

pytestmark = pytest.mark.anyio


async def opened(backend: Backend, *declared: Any) -> tuple[Store, list[Any]]:
    """A store with only `declared` plugin tables (no built-ins), and their facets."""
    store = open_store(backend.settings)
    facets = [store.tables(tables) for tables in declared]
    await store.open()
    backend.opened.append(store)
    return store, facets


async def closed(backend: Backend, store: Store) -> None:
    await store.close()
    backend.opened.remove(store)


async def query(backend: Backend, sql: str) -> list[tuple[Any, ...]]:
    if backend.engine == "sqlite":
        with sqlite3.connect(backend.path / SQLITE_FILE) as db:
            return db.execute(sql).fetchall()
    db = await asyncpg.connect(backend.url)
    try:
        return [tuple(row) for row in await db.fetch(sql)]
    finally:
        await db.close()


async def tables_of(backend: Backend) -> set[str]:
    if backend.engine == "sqlite":
        rows = await query(backend, "SELECT name FROM sqlite_master WHERE type = 'table'")
    else:
        rows = await query(backend, "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
    return {row[0] for row in rows}


async def test_a_plugin_s_table_is_created_when_the_store_opens_and_its_facet_works(backend: Backend) -> None:
    store, (notes,) = await opened(backend, NOTES)
    await notes.add("first")
    await notes.add("second")
    assert await notes.texts() == ["first", "second"]
    assert await query(backend, "SELECT plugin, version, compatible_from FROM plugin_schema") == [("notes", 1, 1)]
    # A fresh store holds the core's tables and those of the plugins declared, no others.
    assert "notes" in await tables_of(backend)
    assert not {"records", "executions", "safety_runs"} & await tables_of(backend)
    assert store.tables(NOTES) is notes


async def test_replicas_starting_together_apply_each_plugin_migration_once(backend: Backend) -> None:
    """The core's lock covers the plugins' migrations: the advisory lock on PostgreSQL, the
    IMMEDIATE transaction on SQLite."""
    stores = [open_store(backend.settings) for _ in range(4)]
    for store in stores:
        store.tables(notes_tables(SQLITE_2, POSTGRES_2))
    await asyncio.gather(*(store.open() for store in stores))
    backend.opened.extend(stores)
    assert await query(backend, "SELECT plugin, version FROM plugin_schema ORDER BY version") == [
        ("notes", 1),
        ("notes", 2),
    ]


async def test_a_new_version_of_a_plugin_applies_only_its_new_migrations(backend: Backend) -> None:
    store, (notes,) = await opened(backend, NOTES)
    await notes.add("kept")
    await closed(backend, store)
    _, (again,) = await opened(backend, notes_tables(SQLITE_2, POSTGRES_2))
    assert await again.texts() == ["kept"]
    assert await query(backend, "SELECT version, compatible_from FROM plugin_schema ORDER BY version") == [
        (1, 1),
        (2, 1),
    ]


async def test_an_older_plugin_runs_on_its_tables_migrated_additively_and_refuses_a_breaking_change(
    backend: Backend,
) -> None:
    store, _ = await opened(backend, notes_tables(SQLITE_2, POSTGRES_2))
    await closed(backend, store)
    older, (notes,) = await opened(backend, NOTES)  # a rollback over an additive migration
    await notes.add("still works")
    await closed(backend, older)
    breaking = Migration("CREATE TABLE notes_v3 (id INTEGER)", additive=False)
    store, _ = await opened(backend, notes_tables((*SQLITE_2, breaking), (*POSTGRES_2, breaking)))
    await closed(backend, store)
    refused = open_store(backend.settings)
    refused.tables(NOTES)
    with pytest.raises(SchemaTooNew) as too_new:
        await refused.open()  # PostgreSQL closes its pool again; SQLite leaves its threads to close
    if backend.engine == "sqlite":
        await refused.close()
    assert (too_new.value.found, too_new.value.needs, too_new.value.known) == (3, 3, 1)
    assert "plugin 'notes'" in str(too_new.value)


async def test_tables_are_declared_before_the_store_opens_and_once_per_name(backend: Backend) -> None:
    store, _ = await opened(backend)
    with pytest.raises(ConfigError, match="declared after the store opened"):
        store.tables(NOTES)
    other = open_store(backend.settings)
    first = other.tables(NOTES)
    assert other.tables(NOTES) is first
    with pytest.raises(ConfigError, match="declared twice"):
        other.tables(notes_tables())


async def test_a_plugin_gets_its_facet_when_it_registers(backend: Backend) -> None:
    store = open_store(backend.settings)
    plugin = NotesPlugin()
    load_plugins([], Registry(), Settings(), store, objects=[plugin])
    await store.open()
    backend.opened.append(store)
    assert plugin.notes is not None
    await plugin.notes.add("registered")
    assert await plugin.notes.texts() == ["registered"]


def test_a_plugin_new_to_an_old_store_starts_after_the_steps_that_store_already_took() -> None:
    steps = (
        Migration("a", additive=False, legacy_core=3),
        Migration("b", additive=True, legacy_core=4),
        Migration("c", additive=False, legacy_core=5),
        Migration("d", additive=True),
    )
    assert [adopted(steps, legacy) for legacy in (0, 2, 3, 4, 5, 13)] == [0, 0, 1, 2, 3, 3]
