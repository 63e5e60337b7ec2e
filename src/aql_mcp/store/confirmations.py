"""Confirmation tokens of the MCP-AQL gatekeeper, kept in the store so they outlive a restart.

A grant is stored under the SHA-256 of its token, never the token: reading the database does not
yield a token anyone could redeem. Consuming a grant is one conditional UPDATE, so two retries
racing with the same token cannot both succeed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


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
