"""The plugin's table, `notes`, on both engines, and the facet its operations call.

Each engine gets its own migrations, numbered from 1, and its own facet class on the engine's public
surface: `SqliteEngine.read`/`write` (a function run on the engine's threads, a write in one
transaction) and `PostgresEngine.fetch`/`execute` (one statement each). Migration 1 is the base; a
later release appends migrations, `additive=True` when the release before still runs on the schema
they leave (docs/store.md, "A plugin's own tables").
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from aql_mcp.plugin import Migration, SqliteEngine, Tables

if TYPE_CHECKING:
    from aql_mcp.plugin import PostgresEngine

# Newest first, at most this many: the list stays one small page.
LIST_LIMIT = 100


@dataclass(frozen=True, slots=True)
class Note:
    id: str
    text: str
    created_at: float


class NoteStore(Protocol):
    async def add(self, owner: str, note: Note) -> None: ...
    async def list(self, owner: str) -> list[Note]: ...
    async def delete(self, owner: str, note_id: str) -> bool: ...


class SqliteNotes:
    def __init__(self, engine: SqliteEngine) -> None:
        self.engine = engine

    async def add(self, owner: str, note: Note) -> None:
        row = (owner, note.id, note.text, note.created_at)
        await self.engine.write(lambda db: db.execute("INSERT INTO notes VALUES (?, ?, ?, ?)", row))

    async def list(self, owner: str) -> list[Note]:
        def read(db: sqlite3.Connection) -> list[tuple[str, str, float]]:
            query = "SELECT id, text, created_at FROM notes WHERE owner = ? ORDER BY created_at DESC, id LIMIT ?"
            return db.execute(query, (owner, LIST_LIMIT)).fetchall()

        return [Note(*row) for row in await self.engine.read(read, tenant=owner)]

    async def delete(self, owner: str, note_id: str) -> bool:
        delete = "DELETE FROM notes WHERE owner = ? AND id = ?"
        return bool(await self.engine.write(lambda db: db.execute(delete, (owner, note_id)).rowcount))


class PostgresNotes:
    def __init__(self, engine: PostgresEngine) -> None:
        self.engine = engine

    async def add(self, owner: str, note: Note) -> None:
        await self.engine.execute(
            "INSERT INTO notes VALUES ($1, $2, $3, $4)", owner, note.id, note.text, note.created_at
        )

    async def list(self, owner: str) -> list[Note]:
        query = "SELECT id, text, created_at FROM notes WHERE owner = $1 ORDER BY created_at DESC, id LIMIT $2"
        rows = await self.engine.fetch(query, owner, LIST_LIMIT, tenant=owner)
        return [Note(row["id"], row["text"], row["created_at"]) for row in rows]

    async def delete(self, owner: str, note_id: str) -> bool:
        status = await self.engine.execute("DELETE FROM notes WHERE owner = $1 AND id = $2", owner, note_id)
        return status == "DELETE 1"


def on_postgres(engine: PostgresEngine) -> NoteStore:
    return PostgresNotes(engine)


NOTES: Tables[NoteStore] = Tables(
    name="notes",
    sqlite=(
        Migration(
            """
            CREATE TABLE notes (
                owner TEXT NOT NULL,
                id TEXT NOT NULL,
                text TEXT NOT NULL,
                created_at REAL NOT NULL,
                PRIMARY KEY (owner, id)
            ) WITHOUT ROWID;
            CREATE INDEX notes_newest ON notes (owner, created_at);
            """,
            additive=False,
        ),
    ),
    postgres=(
        Migration(
            """
            CREATE TABLE notes (
                owner TEXT NOT NULL,
                id TEXT NOT NULL,
                text TEXT NOT NULL,
                created_at DOUBLE PRECISION NOT NULL,
                PRIMARY KEY (owner, id)
            );
            CREATE INDEX notes_newest ON notes (owner, created_at);
            """,
            additive=False,
        ),
    ),
    on_sqlite=SqliteNotes,
    on_postgres=on_postgres,
)
