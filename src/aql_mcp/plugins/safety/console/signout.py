"""Signing out of the console for good (docs/console.md, "Signing out"; issue 27, N6).

Dropping the cookie is not enough: whoever kept a copy of it (another tab's stream, a copied header)
could still open the console until the token expires. Sign-out puts the token on the store's deny
list (store/revocations.py) until then, so every replica sharing the store refuses it: the guard on
every console request and the live stream before every refresh.
"""

from __future__ import annotations

import time

from aql_mcp.plugin import RevocationStore, credential_digest


class SignOuts:
    """The console tokens signed out before their expiry."""

    def __init__(self, store: RevocationStore, *, fallback_seconds: float) -> None:
        self.store = store
        # How long to deny a token that names no expiry (an opaque one): the console's own session length.
        self.fallback_seconds = fallback_seconds

    async def sign_out(self, credential: str, expires_at: float | None) -> None:
        until = expires_at if expires_at is not None else time.time() + self.fallback_seconds
        await self.store.revoke(credential_digest(credential), until)

    async def is_signed_out(self, credential: str) -> bool:
        return await self.store.is_revoked(credential_digest(credential))
