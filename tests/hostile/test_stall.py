"""The stall test of issue 12 ("What it must show"): while one tenant runs 16 filtered listings over
100k records and 300 slow connections are held open, another tenant's `ping` and `/health` keep
answering. Every call has a generous guard against hanging and nothing asserts a speed: the
figures go to the benchmark (`bench/stall.py`, bench/STALL.md).
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from aql_mcp.store.factory import SQLITE_FILE
from tests.support.rawhttp import slow_connections
from tests.support.server import start_server
from tests.support.stall import (
    SERVER_ENV,
    SLOW_CONNECTIONS,
    Figures,
    measure_probes,
    run_listings,
    seed_records,
)
from tests.support.wait import eventually

pytestmark = pytest.mark.anyio
RECORDS = 100_000
SECONDS = 5.0


async def test_ping_and_health_answer_while_a_tenant_scans_100k_records_and_300_slow_connections_are_held(
    tmp_path: Path,
) -> None:
    with start_server(tmp_path, env=SERVER_ENV, plugins=()) as server:
        seed_records(tmp_path / SQLITE_FILE, "tenant-a", RECORDS)
        figures = Figures()
        with slow_connections(server.port, SLOW_CONNECTIONS):
            async with anyio.create_task_group() as group:
                group.start_soon(run_listings, server.base, server.token(subject="tenant-a"), RECORDS, figures)
                await eventually(lambda: figures.listings > 0, "no listing completed", seconds=60.0)
                await measure_probes(server.base, server.token(subject="tenant-b"), SECONDS, figures)
                group.cancel_scope.cancel()
    assert figures.pings
    assert figures.health
