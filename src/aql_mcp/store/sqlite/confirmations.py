"""`ConfirmationStore` on SQLite; consuming a grant is one conditional UPDATE on the writer."""

from __future__ import annotations

from aql_mcp.store.confirmations import Grant
from aql_mcp.store.sqlite.engine import SqliteEngine


class SqliteConfirmationStore:
    """`ConfirmationStore` on the service's SQLite engine."""

    def __init__(self, engine: SqliteEngine) -> None:
        self._engine = engine

    async def put_grant(self, token_hash: str, grant: Grant) -> None:
        row = (token_hash, grant.operation, grant.params_hash, grant.principal, grant.session, grant.expires_at)
        await self._engine.write(
            lambda db: db.execute("INSERT INTO confirmations VALUES (?, ?, ?, ?, ?, ?, NULL)", row)
        )

    async def get_grant(self, token_hash: str) -> Grant | None:
        row = await self._engine.read(
            lambda db: db.execute(
                "SELECT operation, params_hash, principal, session, expires_at, consumed_at "
                "FROM confirmations WHERE token_hash = ?",
                (token_hash,),
            ).fetchone()
        )
        return Grant(*row) if row else None

    async def consume_grant(self, token_hash: str, now: float) -> bool:
        consumed = await self._engine.write(
            lambda db: (
                db.execute(
                    "UPDATE confirmations SET consumed_at = ? WHERE token_hash = ? AND consumed_at IS NULL",
                    (now, token_hash),
                ).rowcount
            )
        )
        return bool(consumed == 1)

    async def purge_grants(self, expired_before: float) -> int:
        return await self._engine.write(
            lambda db: int(db.execute("DELETE FROM confirmations WHERE expires_at < ?", (expired_before,)).rowcount)
        )
