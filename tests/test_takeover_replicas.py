"""Nothing left on a dead replica (docs/executions.md "Leases and takeover", docs/eras.md "Tasks"):
three replicas share one PostgreSQL with a short lease; the replica running the work is killed
with SIGKILL (no shutdown at all), and another replica takes the work over once its lease ran out.

An import resumes after its last written batch and completes with every row exactly once; a
generic task (a handler cannot resume elsewhere) fails with the retryable -32006 `replica_lost`
instead of staying `working` until it expires.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.aql import HEADERS, VERSION, Session
from tests.support.executions import BIG, CREATE, EXECUTE, READ, import_params, ndjson, record_count, rows, settled
from tests.support.replicas import Replica, Replicas, start_replicas
from tests.support.server import ServerProcess
from tests.support.tasks import call, get
from tests.support.wait import until

LEASE = 3.0
# Found within the lease plus one renewal turn of the replica that takes over, with room for a
# loaded machine to schedule it.
TAKEOVER_SECONDS = LEASE + LEASE / 3 + 3.0
ENV = {
    **BIG,
    "AQL_MCP_LIMITS__RATE_PER_SECOND": "1000",
    "AQL_MCP_LIMITS__RATE_BURST": "2000",
    "AQL_MCP_MCP__MODERN_ERA": "true",
    "AQL_MCP_STORE__LEASE_SECONDS": str(LEASE),
    # 100 batches of 1,000 rows take at least 5 s: the kill always lands while the import runs.
    "AQL_MCP_EXECUTIONS__BATCH_PAUSE_SECONDS": "0.05",
}


@pytest.fixture(scope="module")
def replicas(database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Replicas]:
    with start_replicas(tmp_path_factory.mktemp("takeover-replicas"), database, count=3, env=ENV) as started:
        yield started


@contextmanager
def on(server: ServerProcess, replicas: Replicas, subject: str) -> Iterator[Session]:
    """A legacy-era session with one replica."""
    with httpx.Client(base_url=server.base, timeout=60) as http:
        headers = {**HEADERS, "authorization": f"Bearer {replicas.token(subject)}"}
        init = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
        }
        answer = http.post("/mcp", json=init, headers=headers)
        assert answer.status_code == 200, answer.text
        headers |= {"mcp-session-id": answer.headers["mcp-session-id"], "mcp-protocol-version": VERSION}
        yield Session(http, headers)


def takeovers(server: ServerProcess, kind: str, outcome: str) -> float:
    scraped = httpx.get(f"{server.base}/metrics", timeout=10.0)
    assert scraped.status_code == 200
    for family in text_string_to_metric_families(scraped.text):
        for sample in family.samples:
            if sample.name == "aql_mcp_task_takeovers_total" and sample.labels == {
                "task_kind": kind,
                "task_outcome": outcome,
            }:
                return float(sample.value)
    raise AssertionError("no aql_mcp_task_takeovers_total sample")


def kill(server: ServerProcess) -> float:
    """SIGKILL: no shutdown, no last write; the moment it died."""
    server.process.kill()
    server.process.wait()
    return time.monotonic()


def test_an_import_on_a_killed_replica_is_taken_over_and_completes_with_every_row_once(replicas: Replicas) -> None:
    a, b, c = replicas.servers
    with on(a, replicas, "tenant-k") as on_a:
        assert on_a.call(CREATE, "create_collection", collection="c")["success"]
        started = on_a.call(EXECUTE, "execute_import", **import_params("c", ndjson(rows(100_000))))["data"]
        execution_id = started["execution_id"]
        until(
            lambda: on_a.call(READ, "get_execution", execution_id=execution_id)["data"]["progress"]["current"] > 0,
            "the import did not start",
        )
    died = kill(a)
    with on(b, replicas, "tenant-k") as on_b, on(c, replicas, "tenant-k") as on_c:
        seen: dict[str, Any] = {}

        def taken_over() -> bool:
            seen.update(on_c.call(READ, "get_execution", execution_id=execution_id)["data"])
            return int(seen["attempts"]) == 2 or seen["status"] != "running"

        until(taken_over, "no replica took the import over", seconds=TAKEOVER_SECONDS + 20)
        assert time.monotonic() - died <= TAKEOVER_SECONDS, "taken over later than the lease allows"
        assert seen["status"] in ("running", "completed")
        assert seen["attempts"] == 2
        done = settled(on_b, execution_id, 180.0)
        assert (done["status"], done["imported"], done["rejected"]) == ("completed", 100_000, 0)
        assert done["progress"]["current"] == 100_000
        # Every row exactly once: no batch of the dead worker's doubled, none lost.
        assert record_count(on_b, "c") == 100_000
    # One of the survivors counted the takeover on /metrics.
    assert sum(takeovers(server, "execution", "resumed") for server in (b, c)) == 1


def test_a_task_on_a_killed_replica_fails_retryable_within_the_lease(replicas: Replicas) -> None:
    _, b, c = replicas.servers
    runner, other = Replica(b, replicas), Replica(c, replicas)
    task_id = call(runner, "slow_compute", {"seconds": 600}, "kim")["taskId"]
    assert get(other, task_id, "kim")["status"] == "working"
    died = kill(b)
    seen: dict[str, Any] = {}

    def ended() -> bool:
        seen.update(get(other, task_id, "kim"))
        return bool(seen["status"] != "working")

    until(ended, "the task stayed working", seconds=TAKEOVER_SECONDS + 20)
    assert time.monotonic() - died <= TAKEOVER_SECONDS, "failed later than the lease allows"
    assert (seen["status"], seen["statusMessage"]) == ("failed", "replica_lost")
    assert seen["error"]["code"] == -32006
    assert seen["error"]["data"]["retryAfter"] == 1
    assert takeovers(c, "task", "ended") == 1
    # The client may call again: another replica runs it.
    again = call(other, "slow_compute", {"seconds": 0}, "kim")["taskId"]
    until(lambda: get(other, again, "kim")["status"] == "completed", "the retried task did not complete")
