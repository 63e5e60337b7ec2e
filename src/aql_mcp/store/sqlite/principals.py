"""`PrincipalDirectory` on SQLite."""

from __future__ import annotations

import sqlite3
from collections.abc import Collection

from aql_mcp.store.principals import Identity
from aql_mcp.store.sqlite.engine import SqliteEngine

UPSERT = (
    "INSERT INTO principals VALUES (?, ?, ?, ?) ON CONFLICT (principal) "
    "DO UPDATE SET subject = excluded.subject, tenant = excluded.tenant, seen_at = excluded.seen_at"
)


class SqlitePrincipalDirectory:
    """`PrincipalDirectory` on the service's SQLite engine."""

    def __init__(self, engine: SqliteEngine) -> None:
        self._engine = engine

    async def remember(self, identity: Identity, now: float) -> None:
        row = (identity.principal, identity.subject, identity.tenant, now)
        await self._engine.write(lambda db: db.execute(UPSERT, row))

    async def identities(self, principals: Collection[str]) -> dict[str, Identity]:
        wanted = sorted(set(principals))
        if not wanted:
            return {}

        def read(db: sqlite3.Connection) -> list[tuple[str, str, str | None]]:
            marks = ", ".join("?" * len(wanted))
            query = f"SELECT principal, subject, tenant FROM principals WHERE principal IN ({marks})"  # noqa: S608
            return db.execute(query, wanted).fetchall()

        return {row[0]: Identity(*row) for row in await self._engine.read(read)}
