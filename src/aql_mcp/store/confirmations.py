"""Confirmation tokens of the MCP-AQL gatekeeper, kept in the store so they outlive a restart.

A grant is stored under the SHA-256 of its token, never the token: reading the database does not
yield a token anyone could redeem. Consuming a grant is one conditional UPDATE, so two retries
racing with the same token cannot both succeed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from aql_mcp.store.records import SqliteConnection


@dataclass(frozen=True, slots=True)
class Grant:
    """What a confirmation token allows: one call of `operation` with these parameters, by this caller."""

    operation: str
    params_hash: str
    principal: str
    session: str
    expires_at: float
    consumed_at: float | None = None


class ConfirmationStore(Protocol):
    async def put_grant(self, token_hash: str, grant: Grant) -> None: ...
    async def get_grant(self, token_hash: str) -> Grant | None: ...
    async def consume_grant(self, token_hash: str, now: float) -> bool:
        """Mark the grant used; False when it was used already (by a concurrent retry)."""
        ...

    async def purge_grants(self, expired_before: float) -> int: ...


class SqliteConfirmationStore:
    """`ConfirmationStore` on the connection of the service's SQLite store."""

    def __init__(self, store: SqliteConnection) -> None:
        self._store = store

    async def put_grant(self, token_hash: str, grant: Grant) -> None:
        with self._store.transaction() as db:
            db.execute(
                "INSERT INTO confirmations VALUES (?, ?, ?, ?, ?, ?, NULL)",
                (token_hash, grant.operation, grant.params_hash, grant.principal, grant.session, grant.expires_at),
            )

    async def get_grant(self, token_hash: str) -> Grant | None:
        with self._store.guard() as db:
            row = db.execute(
                "SELECT operation, params_hash, principal, session, expires_at, consumed_at "
                "FROM confirmations WHERE token_hash = ?",
                (token_hash,),
            ).fetchone()
        return Grant(*row) if row else None

    async def consume_grant(self, token_hash: str, now: float) -> bool:
        with self._store.transaction() as db:
            cursor = db.execute(
                "UPDATE confirmations SET consumed_at = ? WHERE token_hash = ? AND consumed_at IS NULL",
                (now, token_hash),
            )
            return cursor.rowcount == 1

    async def purge_grants(self, expired_before: float) -> int:
        with self._store.transaction() as db:
            return int(db.execute("DELETE FROM confirmations WHERE expires_at < ?", (expired_before,)).rowcount)
