"""An outside plugin's own table, declared only through `aql_mcp.plugin`: notes, one row each, on
either engine (docs/store.md, "A plugin's own tables")."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from typing import Protocol

from aql_mcp.plugin import Migration, PluginOperations, PostgresEngine, SqliteEngine, Tables, TrustLevel

SQLITE = (Migration("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT NOT NULL)", additive=False),)
POSTGRES = (Migration("CREATE TABLE notes (id BIGSERIAL PRIMARY KEY, text TEXT NOT NULL)", additive=False),)
# The second version of the plugin: one more, additive, migration on each engine.
SQLITE_2 = (*SQLITE, Migration("ALTER TABLE notes ADD COLUMN tag TEXT", additive=True))
POSTGRES_2 = (*POSTGRES, Migration("ALTER TABLE notes ADD COLUMN tag TEXT", additive=True))


class Notes(Protocol):
    async def add(self, text: str) -> None: ...
    async def texts(self) -> list[str]: ...


class SqliteNotes:
    def __init__(self, engine: SqliteEngine) -> None:
        self._engine = engine

    async def add(self, text: str) -> None:
        await self._engine.write(lambda db: db.execute("INSERT INTO notes (text) VALUES (?)", (text,)))

    async def texts(self) -> list[str]:
        def read(db: sqlite3.Connection) -> list[str]:
            return [row[0] for row in db.execute("SELECT text FROM notes ORDER BY id")]

        return await self._engine.read(read)


class PostgresNotes:
    def __init__(self, engine: PostgresEngine) -> None:
        self._engine = engine

    async def add(self, text: str) -> None:
        await self._engine.execute("INSERT INTO notes (text) VALUES ($1)", text)

    async def texts(self) -> list[str]:
        return [row["text"] for row in await self._engine.fetch("SELECT text FROM notes ORDER BY id")]


def notes_tables(sqlite: tuple[Migration, ...] = SQLITE, postgres: tuple[Migration, ...] = POSTGRES) -> Tables[Notes]:
    return Tables("notes", sqlite, postgres, SqliteNotes, PostgresNotes)


NOTES = notes_tables()


@dataclass
class NotesPlugin:
    """Takes its facet when it registers, as any plugin with tables does."""

    name: str = "notes"
    trust: TrustLevel = "community_reviewed"
    notes: Notes | None = field(default=None, repr=False)

    def register_operations(self, operations: PluginOperations) -> None:
        self.notes = operations.tables(NOTES)
