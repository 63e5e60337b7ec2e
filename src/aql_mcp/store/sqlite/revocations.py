"""`RevocationStore` on SQLite."""

from __future__ import annotations

from aql_mcp.store.sqlite.engine import SqliteEngine


class SqliteRevocationStore:
    """`RevocationStore` on the service's SQLite engine."""

    def __init__(self, engine: SqliteEngine) -> None:
        self._engine = engine

    async def revoke(self, token_hash: str, expires_at: float) -> None:
        await self._engine.write(
            lambda db: db.execute(
                "INSERT INTO revoked_tokens VALUES (?, ?) ON CONFLICT (token_hash) DO NOTHING", (token_hash, expires_at)
            )
        )

    async def is_revoked(self, token_hash: str) -> bool:
        row = await self._engine.read(
            lambda db: db.execute("SELECT 1 FROM revoked_tokens WHERE token_hash = ?", (token_hash,)).fetchone()
        )
        return row is not None

    async def purge_revocations(self, expired_before: float) -> int:
        return await self._engine.write(
            lambda db: int(db.execute("DELETE FROM revoked_tokens WHERE expires_at < ?", (expired_before,)).rowcount)
        )
