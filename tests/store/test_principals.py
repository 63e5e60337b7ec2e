"""Who a principal key stands for (store/principals.py; issue 27, N8), on every engine."""

from __future__ import annotations

import pytest

from aql_mcp.store.base import Store
from aql_mcp.store.principals import Identity
from tests.support.engines import Backend

pytestmark = pytest.mark.anyio


async def test_a_remembered_principal_is_found_by_its_key_and_an_unknown_one_is_left_out(store: Store) -> None:
    await store.principals.remember(Identity("p1", "alice", "acme"), 1.0)
    await store.principals.remember(Identity("p2", "bob"), 1.0)
    found = await store.principals.identities(["p1", "p2", "p3"])
    assert found == {"p1": Identity("p1", "alice", "acme"), "p2": Identity("p2", "bob", None)}


async def test_remembering_again_keeps_one_row_with_the_latest_tenant(store: Store) -> None:
    await store.principals.remember(Identity("p1", "alice", "acme"), 1.0)
    await store.principals.remember(Identity("p1", "alice", "globex"), 2.0)
    assert await store.principals.identities(["p1"]) == {"p1": Identity("p1", "alice", "globex")}


async def test_no_keys_asks_nothing(store: Store) -> None:
    assert await store.principals.identities([]) == {}


async def test_a_principal_remembered_on_one_replica_is_named_on_the_other(backend: Backend) -> None:
    first, second = await backend.open(), await backend.open()
    await first.principals.remember(Identity("p1", "alice"), 1.0)
    assert await second.principals.identities({"p1"}) == {"p1": Identity("p1", "alice")}
