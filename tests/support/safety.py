"""Reading the safety loop's store from a test, as the operator console does: the only place a
verification code may be read from (MCP-AQL §8.8.4; docs/safety.md)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from pydantic import SecretStr

from aql_mcp.plugins.safety.store import Challenge
from aql_mcp.settings import Settings, StoreSettings
from aql_mcp.store.factory import open_store
from tests.support.plugin_store import with_built_ins


def stored_challenge(state: Path, challenge_id: str, url: str = "") -> Challenge:
    """The challenge as the store of `state` (SQLite) or `url` (PostgreSQL) holds it."""

    async def read() -> Challenge:
        store = with_built_ins(
            open_store(Settings(store=StoreSettings(path=state, url=SecretStr(url), pool_min_size=1)))
        )
        await store.open()
        try:
            found = await store.safety.get_challenge(challenge_id)
            assert found is not None
            return found
        finally:
            await store.close()

    return asyncio.run(read())
