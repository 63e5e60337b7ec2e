"""bench/audit.py: the calls of the audit rows against a real `aql-mcp serve`, with the trail on and
off. The rows compare the two settings, so each must make its calls succeed and leave the records
the setting says: none at all with `audit.trail: false`. Speed is the benchmark's business."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.support.bench import load_bench_module
from tests.support.server import ServerProcess, start_server
from tests.support.wait import arrives

ECHO = "aql_mcp.testing.echo:plugin"

bench_audit = load_bench_module("audit")


async def _rows(server: ServerProcess, expected: int) -> int:
    """Each operation of the audit rows once, as the benchmark makes it; the records kept after,
    waiting a little for `expected` (a read's record is queued after its reply, docs/audit.md)."""
    target = bench_audit.Target("under test", server, server.token(), None)
    try:
        await target.aql("mcp_aql_create", "create_collection", collection="bench")
        created = await target.aql("mcp_aql_create", "create_record", collection="bench", data={"n": 0})
        target.ids.append(created["data"]["id"])
        for operation in bench_audit.OPERATIONS:
            await target.run(operation, 1)

        async def kept_enough() -> bool:
            return int(await target.records()) >= expected

        await arrives(kept_enough, f"the trail kept fewer than {expected} records")
        return int(await target.records())
    finally:
        await target.http.aclose()


@pytest.mark.parametrize(
    ("setting", "records"),
    [
        # create_collection, two create_record; neither echo nor the read is recorded.
        ("trail on", 3),
        ("trail off", 0),
        # ... and the read, with audit.reads.
        ("trail on, reads", 4),
    ],
)
def test_each_setting_of_the_audit_rows_serves_the_calls_and_keeps_its_records(
    tmp_path: Path, setting: str, records: int
) -> None:
    env = dict(bench_audit.SETTINGS[setting])
    with start_server(tmp_path, env=env, plugins=(ECHO,)) as server:
        assert asyncio.run(_rows(server, records)) == records
