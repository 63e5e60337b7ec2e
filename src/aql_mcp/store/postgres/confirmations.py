"""`ConfirmationStore` on PostgreSQL; consuming a grant is one conditional UPDATE."""

from __future__ import annotations

from aql_mcp.store.confirmations import Grant
from aql_mcp.store.postgres.engine import PostgresEngine


class PostgresConfirmationStore:
    def __init__(self, engine: PostgresEngine) -> None:
        self._engine = engine

    async def put_grant(self, token_hash: str, grant: Grant) -> None:
        await self._engine.execute(
            "INSERT INTO confirmations VALUES ($1, $2, $3, $4, $5, $6, NULL)",
            token_hash,
            grant.operation,
            grant.params_hash,
            grant.principal,
            grant.session,
            grant.expires_at,
        )

    async def get_grant(self, token_hash: str) -> Grant | None:
        row = await self._engine.fetchrow(
            "SELECT operation, params_hash, principal, session, expires_at, consumed_at "
            "FROM confirmations WHERE token_hash = $1",
            token_hash,
        )
        return Grant(*row) if row else None

    async def consume_grant(self, token_hash: str, now: float) -> bool:
        status = await self._engine.execute(
            "UPDATE confirmations SET consumed_at = $2 WHERE token_hash = $1 AND consumed_at IS NULL", token_hash, now
        )
        return bool(status == "UPDATE 1")

    async def purge_grants(self, expired_before: float) -> int:
        status = await self._engine.execute("DELETE FROM confirmations WHERE expires_at < $1", expired_before)
        return int(status.rsplit(" ", 1)[-1])
