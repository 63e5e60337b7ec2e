"""One tenant's listings starved every tenant's reads (issue 27, N2).

Listings ran on the shared store connections first come first served: 16 concurrent sorted listings
by one tenant over a large collection kept another tenant's `list_records` on a 3-record collection
waiting behind all of them. What must hold against a real `aql-mcp serve` (docs/store.md, "Fair
store access"): while one tenant floods, another tenant's small reads keep answering (a tenant
holds at most its share of the readers or connections, and a freed one goes to the tenant holding
fewest); and a listing that would examine more records than `store.listing_scan_rows` is refused
with `VALIDATION_PAYLOAD_TOO_LARGE` before it scans.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from aql_mcp.plugins.records.store import NewRecord, Quota
from aql_mcp.settings import Settings, StoreSettings
from aql_mcp.store.factory import open_store
from tests.support.aql import Session, session
from tests.support.plugin_store import with_built_ins
from tests.support.server import ServerProcess, start_server

ATTACKER, VICTIM = "mallory", "alice"
# Big enough that a sorted listing takes a reader for a while, small enough to seed in about a second.
RECORDS = 40_000
FLOOD = 16
# Far above what a 3-record listing takes on an idle replica, far below what it waited behind the
# flood before the fix (every reader busy with the attacker's listings, each call queued behind them).
CLIENT_SECONDS = 1.0
VICTIM_CALLS = 5
# Records of some size: sorting them parses every one.
PADDING = "x" * 2000
NOW = "2026-01-01T00:00:00.000Z"
HEAVY = {"collection": "big", "sort": {"field": "n", "order": "desc"}, "first": 1}
BASE_ENV = {
    # The attacker stays within its per-caller limits; the rate limit is not what this is about.
    "AQL_MCP_LIMITS__RATE_PER_SECOND": "100000",
    "AQL_MCP_LIMITS__RATE_BURST": "100000",
    # Few readers make the starvation show with a small collection.
    "AQL_MCP_STORE__SQLITE_READERS": "2",
    "AQL_MCP_STORE__POOL_MAX_SIZE": "2",
}


def seed(state: Path, url: str) -> None:
    """The attacker's large collection and the victim's 3 records, written through the store before start."""

    async def write() -> None:
        store = with_built_ins(
            open_store(Settings(store=StoreSettings(path=state, url=SecretStr(url), pool_min_size=1)))
        )
        await store.open()
        try:
            records, quota = store.records, Quota(10**9, 10**12)
            await records.create_collection(ATTACKER, "big", "", None, NOW)
            big = [NewRecord("big", f"r{i}", {"n": i, "body": PADDING}, "e", NOW) for i in range(RECORDS)]
            await records.create_records(ATTACKER, "big", big, quota)
            await records.create_collection(VICTIM, "small", "", None, NOW)
            small = [NewRecord("small", f"s{i}", {"n": i}, "e", NOW) for i in range(3)]
            await records.create_records(VICTIM, "small", small, quota)
        finally:
            await store.close()

    asyncio.run(write())


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    state = tmp_path_factory.mktemp("fair")
    env = dict(BASE_ENV)
    if request.param == "postgres":
        env["AQL_MCP_STORE__URL"] = request.getfixturevalue("database")
    seed(state, env.get("AQL_MCP_STORE__URL", ""))
    # The attacker's listings pass the scan budget here: what is under test is who gets a reader.
    env["AQL_MCP_STORE__LISTING_SCAN_ROWS"] = str(RECORDS)
    with start_server(state, env=env, plugins=()) as started:
        yield started


def flood(server: ServerProcess, stop: threading.Event, answered: threading.Event) -> list[bool]:
    """One attacker client listing the big collection, sorted, until `stop`; whether each listing succeeded."""
    outcomes: list[bool] = []
    with session(server, subject=ATTACKER) as attacker:
        while not stop.is_set():
            outcomes.append(attacker.call("mcp_aql_read", "list_records", **HEAVY)["success"])
            answered.set()
    return outcomes


def small_listing(victim: Session) -> dict[str, Any]:
    try:
        return victim.call("mcp_aql_read", "list_records", collection="small")
    except httpx.TimeoutException:
        pytest.fail(f"another tenant's 3-record listing got no answer within {CLIENT_SECONDS}s: starved")


def test_another_tenants_small_listing_answers_while_one_tenant_floods_sorted_listings(
    server: ServerProcess,
) -> None:
    stop, answered = threading.Event(), threading.Event()
    with session(server, subject=VICTIM) as victim, ThreadPoolExecutor(FLOOD) as pool:
        victim.http.timeout = httpx.Timeout(CLIENT_SECONDS)
        attackers = [pool.submit(flood, server, stop, answered) for _ in range(FLOOD)]
        try:
            # One listing answered: the others are in flight or queued behind it.
            assert answered.wait(timeout=60)
            for _ in range(VICTIM_CALLS):
                page = small_listing(victim)
                assert page["success"] is True
                assert [item["id"] for item in page["data"]["items"]] == ["s0", "s1", "s2"]
        finally:
            stop.set()
        # The attacker was slowed to its share, not refused.
        assert all(all(attacker.result()) for attacker in attackers)


def test_a_listing_that_would_scan_more_than_the_budget_is_refused(tmp_path: Path) -> None:
    """MCP-AQL error codes §4.7: a limit the request exceeds; the caller narrows it (a plain listing passes)."""
    seed(tmp_path, "")
    env = {**BASE_ENV, "AQL_MCP_STORE__LISTING_SCAN_ROWS": str(RECORDS - 1)}
    with start_server(tmp_path, env=env, plugins=()) as started, session(started, subject=ATTACKER) as attacker:
        refused = attacker.call("mcp_aql_read", "list_records", **HEAVY)
        assert refused["success"] is False
        assert refused["error"]["code"] == "VALIDATION_PAYLOAD_TOO_LARGE"
        assert refused["error"]["details"]["limit_type"] == "scan_rows"
        assert refused["error"]["details"]["limit_value"] == RECORDS - 1
        plain = attacker.call("mcp_aql_read", "list_records", collection="big", first=2)
        assert plain["success"] is True
        assert len(plain["data"]["items"]) == 2
