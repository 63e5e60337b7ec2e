"""Signing out of the console for good (plugins/safety/console/signout.py; issue 27, N6): the token is denied until
it expires, by its digest, and another token is not."""

from __future__ import annotations

import time

import pytest

from aql_mcp.auth.opaque import digest
from aql_mcp.plugins.safety.console.signout import SignOuts
from aql_mcp.store.base import Store

pytestmark = pytest.mark.anyio


async def test_a_signed_out_token_is_denied_and_another_is_not(store: Store) -> None:
    sign_outs = SignOuts(store.revocations, fallback_seconds=60)
    await sign_outs.sign_out("token-one", time.time() + 600)
    assert await sign_outs.is_signed_out("token-one")
    assert not await sign_outs.is_signed_out("token-two")


async def test_the_deny_list_holds_the_digest_never_the_token(store: Store) -> None:
    await SignOuts(store.revocations, fallback_seconds=60).sign_out("token-one", time.time() + 600)
    assert await store.revocations.is_revoked(digest("token-one"))
    assert not await store.revocations.is_revoked("token-one")


async def test_a_token_without_an_expiry_is_denied_for_the_fallback_then_forgotten(store: Store) -> None:
    before = time.time()
    await SignOuts(store.revocations, fallback_seconds=60).sign_out("opaque", None)
    assert await store.revocations.purge_revocations(before + 30) == 0
    assert await store.revocations.purge_revocations(time.time() + 61) == 1
