"""The stall benchmark (issue 12): another tenant's `ping` and `/health` while one tenant runs 16
filtered listings over 100k records (a substring filter no index serves, and a sort) and 300 slow
connections are held open. `tests/hostile/test_stall.py` checks the same scenario answers; this
measures how fast.

    .venv/bin/python bench/stall.py                      # writes bench/STALL.md (about a minute)
    .venv/bin/python bench/stall.py --seconds 5 --output /tmp/stall.md

The server (SQLite) is pinned to CPU 0 with all its threads; the listings run in a second process
and the probes in this one, both on CPU 1, so the probes never queue behind the listings in one
client. Probes are sequential (c=1): a ping in its own session, then GET /health.
Nothing here asserts a number; it measures and writes a table.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.rawhttp import slow_connections  # noqa: E402
from tests.support.server import ServerProcess, start_server  # noqa: E402
from tests.support.stall import (  # noqa: E402
    SERVER_ENV,
    SLOW_CONNECTIONS,
    Figures,
    measure_probes,
    percentile,
    run_listings,
    seed_records,
)

from aql_mcp.store.factory import SQLITE_FILE  # noqa: E402

RECORDS = 100_000


def listings_process(server: ServerProcess) -> subprocess.Popen[bytes]:
    command = [sys.executable, __file__, "--listings", server.base, server.token(subject="tenant-a", ttl=3600)]
    return subprocess.Popen(command, cwd=ROOT)


def listings_done(server: ServerProcess) -> float:
    """Listings completed so far, from the service's own counter (GET /metrics)."""
    text = httpx.get(f"{server.base}/metrics", timeout=30).text
    prefix = 'aql_mcp_calls_total{operation="list_records",outcome="ok",tool="mcp_aql_read"} '
    return sum(float(line.removeprefix(prefix)) for line in text.splitlines() if line.startswith(prefix))


async def probe(server: ServerProcess, seconds: float, label: str) -> dict[str, object]:
    figures = Figures()
    before = listings_done(server)
    await measure_probes(server.base, server.token(subject="tenant-b", ttl=3600), seconds, figures)
    row = {
        "load": label,
        "listings_s": (listings_done(server) - before) / seconds,
        "pings": len(figures.pings),
        "ping_p50": percentile(figures.pings, 0.5),
        "ping_p99": percentile(figures.pings, 0.99),
        "health_p50": percentile(figures.health, 0.5),
        "health_p99": percentile(figures.health, 0.99),
    }
    print(row, flush=True)
    return row


async def measure(seconds: float) -> list[dict[str, object]]:
    os.sched_setaffinity(0, {1})
    state = Path(tempfile.mkdtemp(prefix="aql-stall-bench-"))
    rows = []
    with start_server(state, env={**SERVER_ENV, "AQL_MCP_LOGGING__LEVEL": "warning"}, plugins=()) as server:
        subprocess.run(["taskset", "-a", "-cp", "0", str(server.process.pid)], capture_output=True, check=True)
        seed_records(state / SQLITE_FILE, "tenant-a", RECORDS)
        rows.append(await probe(server, seconds, "none"))
        listings = listings_process(server)
        try:
            await asyncio.sleep(2.0)
            rows.append(await probe(server, seconds, "16 listings"))
            with slow_connections(server.port, SLOW_CONNECTIONS):
                rows.append(await probe(server, seconds, f"16 listings + {SLOW_CONNECTIONS} slow connections"))
        finally:
            listings.terminate()
            listings.wait()
    return rows


def write(rows: list[dict[str, object]], output: Path, seconds: float) -> None:
    lines = [
        "# Stall benchmark",
        "",
        f"`{' '.join(['.venv/bin/python', 'bench/stall.py', *sys.argv[1:]])}` on {time.strftime('%Y-%m-%d')}, "
        f"{os.cpu_count()} CPUs; the server (SQLite, {RECORDS:,} records of tenant A) on CPU 0, the load on CPU 1; "
        f"{seconds:g} s per row. Tenant B's ping (own session) and GET /health, one after the other; "
        "latencies in ms (`bench/stall.py` docstring).",
        "",
        "| load | listings/s | pings | ping p50 | ping p99 | /health p50 | /health p99 |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['load']} | {r['listings_s']:.1f} | {r['pings']} | {r['ping_p50']:.1f} | {r['ping_p99']:.1f} | "
            f"{r['health_p50']:.1f} | {r['health_p99']:.1f} |"
        )
    output.write_text("\n".join(lines) + "\n", encoding="utf-8")


def listings_only(base: str, token: str) -> None:
    os.sched_setaffinity(0, {1})
    asyncio.run(run_listings(base, token, RECORDS, Figures()))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--listings"]:
        listings_only(sys.argv[2], sys.argv[3])
        sys.exit(0)
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--output", default=str(ROOT / "bench" / "STALL.md"))
    options = parser.parse_args()
    measured = asyncio.run(measure(options.seconds))
    write(measured, Path(options.output), options.seconds)
    print(f"stall bench: wrote {options.output}")
