"""Tokens signed out before they expire: the operator console's deny list (docs/console.md,
"Signing out").

A token is kept under its SHA-256 (`auth/opaque.py` `digest`), never itself, until it would have
expired anyway; housekeeping forgets it then. The list is in the store, so a sign-out on one replica
holds on every replica that shares it.
"""

from __future__ import annotations

from typing import Protocol


class RevocationStore(Protocol):
    async def revoke(self, token_hash: str, expires_at: float) -> None:
        """Deny the token until `expires_at`; revoking it again changes nothing."""
        ...

    async def is_revoked(self, token_hash: str) -> bool: ...
    async def purge_revocations(self, expired_before: float) -> int:
        """Forget the tokens that expired before `expired_before`; how many."""
        ...
