"""`RevocationStore` on PostgreSQL."""

from __future__ import annotations

from aql_mcp.store.postgres.engine import PostgresEngine


class PostgresRevocationStore:
    def __init__(self, engine: PostgresEngine) -> None:
        self._engine = engine

    async def revoke(self, token_hash: str, expires_at: float) -> None:
        await self._engine.execute(
            "INSERT INTO revoked_tokens VALUES ($1, $2) ON CONFLICT (token_hash) DO NOTHING", token_hash, expires_at
        )

    async def is_revoked(self, token_hash: str) -> bool:
        found = await self._engine.fetchval("SELECT 1 FROM revoked_tokens WHERE token_hash = $1", token_hash)
        return found is not None

    async def purge_revocations(self, expired_before: float) -> int:
        status = await self._engine.execute("DELETE FROM revoked_tokens WHERE expires_at < $1", expired_before)
        return int(status.rsplit(" ", 1)[-1])
