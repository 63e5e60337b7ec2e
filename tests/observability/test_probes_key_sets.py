"""Readiness with several trusted issuers' key sets (docs/identity.md, "Several issuers"): one IdP
that cannot be reached degrades the replica, only none usable takes it out of rotation."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from aql_mcp.auth.jwks import JwksKeySource
from aql_mcp.observability.probes import key_status
from tests.support.idp import running_idp

pytestmark = pytest.mark.anyio

# The discard port: nothing listens there, the connection is refused.
UNREACHABLE = "http://127.0.0.1:9/jwks.json"


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=5.0) as client:
        yield client


async def test_the_key_sets_are_unavailable_only_when_none_is_usable(http: httpx.AsyncClient) -> None:
    with running_idp() as idp:
        good = JwksKeySource(idp.jwks_url, client=http, algorithms=("RS256",))
        other = JwksKeySource(idp.jwks_url, client=http, algorithms=("RS256",))
        down = JwksKeySource(UNREACHABLE, client=http, algorithms=("RS256",))
        assert await good.refresh()
        assert await other.refresh()
        assert not await down.refresh()

    assert key_status([good, other]) == "ok"
    assert key_status([good, down]) == "degraded"
    assert key_status([down]) == "unavailable"
    assert key_status([down, JwksKeySource(UNREACHABLE, client=http, algorithms=("RS256",))]) == "unavailable"
