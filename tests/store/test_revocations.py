"""The deny list of signed-out tokens (store/revocations.py; issue 27, N6), on every engine."""

from __future__ import annotations

import pytest

from aql_mcp.store.base import Store
from tests.support.engines import Backend

pytestmark = pytest.mark.anyio


async def test_a_revoked_token_is_revoked_and_another_is_not(store: Store) -> None:
    await store.revocations.revoke("a" * 64, 2000.0)
    assert await store.revocations.is_revoked("a" * 64)
    assert not await store.revocations.is_revoked("b" * 64)


async def test_revoking_a_token_twice_keeps_one_entry(store: Store) -> None:
    """Two sign-outs of one token (two tabs) both succeed."""
    await store.revocations.revoke("a" * 64, 2000.0)
    await store.revocations.revoke("a" * 64, 2000.0)
    assert await store.revocations.purge_revocations(3000.0) == 1


async def test_purge_forgets_only_the_tokens_past_their_expiry(store: Store) -> None:
    await store.revocations.revoke("a" * 64, 1000.0)
    await store.revocations.revoke("b" * 64, 3000.0)
    assert await store.revocations.purge_revocations(2000.0) == 1
    assert not await store.revocations.is_revoked("a" * 64)
    assert await store.revocations.is_revoked("b" * 64)


async def test_a_sign_out_on_one_replica_holds_on_the_other(backend: Backend) -> None:
    first, second = await backend.open(), await backend.open()
    await first.revocations.revoke("a" * 64, 2000.0)
    assert await second.revocations.is_revoked("a" * 64)
