"""The stall scenario of issue 12, shared by `tests/hostile/test_stall.py` (which checks that every
call is answered) and `bench/stall.py` (which reports how fast): one tenant runs 16 listings that no
index serves over 100k records while 300 slow connections are held open, and another tenant's
`ping` and `/health` are measured meanwhile.
"""

from __future__ import annotations

import secrets
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx
import orjson

from tests.support.asgi import open_session, rpc

COLLECTION = "notes"
STATUSES = ("open", "done", "hold", "review", "draft", "late", "blocked", "new", "old", "spam")
LISTINGS = 16
SLOW_CONNECTIONS = 300
# Guards each call against hanging; speed is the benchmark's business, not an assertion.
CALL_GUARD_SECONDS = 60.0
# What lets 16 listings and the probes through the per-caller limits, and 100k records into the quota.
SERVER_ENV = {
    "AQL_MCP_LIMITS__RATE_PER_SECOND": "100000",
    "AQL_MCP_LIMITS__RATE_BURST": "100000",
    "AQL_MCP_LIMITS__MAX_CONCURRENT_CALLS": "64",
    "AQL_MCP_RECORDS__MAX_RECORDS": "1000000",
    # The listings scan all 100k records on purpose (the loop must stay free whatever they cost): above
    # the scan budget that would refuse them (docs/store.md, "Scan budget").
    "AQL_MCP_STORE__LISTING_SCAN_ROWS": "1000000",
    # The slow connections stay open for the whole run: the worst case for the replica.
    "AQL_MCP_HTTP__HEADER_TIMEOUT_SECONDS": "300",
}


def seed_records(database: Path, tenant: str, count: int) -> None:
    """`count` records of `tenant` in the collection, written in bulk as the records plugin writes them
    (the server has created the schema; bench/store.py seeds the same way)."""
    now = "2026-11-24T00:00:00.000Z"
    rows = [(f"rec_{i:020x}", orjson.dumps(_data(i))) for i in range(count)]
    size = sum(len(body) for _, body in rows)
    db = sqlite3.connect(database)
    with db:
        db.execute(
            "INSERT INTO record_collections (tenant, name, description, fields, created_at) VALUES (?, ?, '', NULL, ?)",
            (tenant, COLLECTION, now),
        )
        db.executemany(
            "INSERT INTO records (tenant, collection, id, data, size, etag, created_at, updated_at, pos) "
            "VALUES (?, ?, ?, ?, ?, 'e', ?, ?, ?)",
            [(tenant, COLLECTION, rid, body, len(body), now, now, i + 1) for i, (rid, body) in enumerate(rows)],
        )
        db.execute(
            "UPDATE record_collections SET next_pos = ?, record_count = ? WHERE tenant = ? AND name = ?",
            (count, count, tenant, COLLECTION),
        )
        db.execute(
            "INSERT INTO record_usage VALUES (?, ?, ?) ON CONFLICT (tenant) DO UPDATE "
            "SET records = records + excluded.records, bytes = bytes + excluded.bytes",
            (tenant, count, size),
        )
    db.close()


def _data(index: int) -> dict[str, Any]:
    return {"status": STATUSES[index % len(STATUSES)], "n": index, "title": f"note {index}"}


@dataclass
class Figures:
    """Latencies in seconds of what was measured, and how many listings completed meanwhile."""

    pings: list[float] = field(default_factory=list)
    health: list[float] = field(default_factory=list)
    listings: int = 0


async def run_listings(base: str, token: str, count: int, figures: Figures) -> None:
    """16 filtered, sorted listings (a substring of the title, which no index serves) until cancelled."""
    async with httpx.AsyncClient(base_url=base, timeout=CALL_GUARD_SECONDS) as http:
        session = await open_session(http, token)

        async def listing() -> None:
            while True:
                params = {"collection": COLLECTION, "first": 20, "sort": {"field": "n", "order": "desc"}}
                params["filter"] = {"title": {"contains": f"te {secrets.randbelow(count)}"}}
                call = rpc(
                    "tools/call", {"name": "mcp_aql_read", "arguments": {"operation": "list_records", "params": params}}
                )
                with anyio.fail_after(CALL_GUARD_SECONDS):
                    answer = await http.post("/mcp", json=call, headers=session)
                result = answer.json()["result"]
                assert result["structuredContent"]["success"], result
                figures.listings += 1

        async with anyio.create_task_group() as group:
            for _ in range(LISTINGS):
                group.start_soon(listing)


async def measure_probes(base: str, token: str, seconds: float, figures: Figures) -> None:
    """Another tenant's pings in its own session, and `/health`, one after the other for `seconds`."""
    async with httpx.AsyncClient(base_url=base, timeout=CALL_GUARD_SECONDS) as http:
        session = await open_session(http, token)
        stop = time.monotonic() + seconds
        while time.monotonic() < stop:
            start = time.perf_counter()
            with anyio.fail_after(CALL_GUARD_SECONDS):
                pong = await http.post("/mcp", json=rpc("ping", message_id=1), headers=session)
            assert pong.json() == {"jsonrpc": "2.0", "id": 1, "result": {}}
            figures.pings.append(time.perf_counter() - start)
            start = time.perf_counter()
            with anyio.fail_after(CALL_GUARD_SECONDS):
                health = await http.get("/health")
            assert health.status_code == 200
            figures.health.append(time.perf_counter() - start)


def percentile(values: list[float], q: float) -> float:
    """The q-quantile in milliseconds (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000
