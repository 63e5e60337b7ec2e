"""`PrincipalDirectory` on PostgreSQL."""

from __future__ import annotations

from collections.abc import Collection

from aql_mcp.store.postgres.engine import PostgresEngine
from aql_mcp.store.principals import Identity

UPSERT = (
    "INSERT INTO principals VALUES ($1, $2, $3, $4) ON CONFLICT (principal) "
    "DO UPDATE SET subject = excluded.subject, tenant = excluded.tenant, seen_at = excluded.seen_at"
)


class PostgresPrincipalDirectory:
    def __init__(self, engine: PostgresEngine) -> None:
        self._engine = engine

    async def remember(self, identity: Identity, now: float) -> None:
        await self._engine.execute(UPSERT, identity.principal, identity.subject, identity.tenant, now)

    async def identities(self, principals: Collection[str]) -> dict[str, Identity]:
        wanted = sorted(set(principals))
        if not wanted:
            return {}
        rows = await self._engine.fetch(
            "SELECT principal, subject, tenant FROM principals WHERE principal = ANY($1::text[])", wanted
        )
        return {row[0]: Identity(row[0], row[1], row[2]) for row in rows}
