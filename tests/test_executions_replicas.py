"""Executions across three replicas sharing one PostgreSQL (docs/executions.md): the replica that
accepted an import runs it, and every other replica reads and cancels it through the store's row.

The import follows itself on replica A (progress notifications on its stream) while
`cancel_execution` lands on replica B: the worker on A learns of it from its next batch's
transaction, so what was written is whole batches, equal to what `get_execution` on C reports.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

from tests.support.aql import HEADERS, VERSION, Session
from tests.support.executions import (
    BIG,
    CREATE,
    EXECUTE,
    READ,
    follow,
    import_params,
    ndjson,
    record_count,
    rows,
    settled,
)
from tests.support.replicas import Replicas, start_replicas
from tests.support.server import ServerProcess

# The replicas split the rate budget between them; these tests poll, several replicas at a time.
ENV = {**BIG, "AQL_MCP_LIMITS__RATE_PER_SECOND": "1000", "AQL_MCP_LIMITS__RATE_BURST": "2000"}


@pytest.fixture(scope="module")
def replicas(database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Replicas]:
    with start_replicas(tmp_path_factory.mktemp("execution-replicas"), database, count=3, env=ENV) as started:
        yield started


@contextmanager
def on(server: ServerProcess, replicas: Replicas, subject: str) -> Iterator[Session]:
    """A legacy-era session with one replica, with a token every replica accepts."""
    with httpx.Client(base_url=server.base, timeout=60) as http:
        headers = {**HEADERS, "authorization": f"Bearer {replicas.token(subject)}"}
        init = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "r", "version": "1"}},
        }
        answer = http.post("/mcp", json=init, headers=headers)
        assert answer.status_code == 200, answer.text
        headers |= {"mcp-session-id": answer.headers["mcp-session-id"], "mcp-protocol-version": VERSION}
        yield Session(http, headers)


def test_a_cancel_on_replica_b_stops_the_import_running_on_a_and_c_reads_whole_batches(replicas: Replicas) -> None:
    a, b, c = replicas.servers
    with on(a, replicas, "tenant-1") as on_a, on(b, replicas, "tenant-1") as on_b, on(c, replicas, "tenant-1") as on_c:
        assert on_a.call(CREATE, "create_collection", collection="big")["success"]
        arguments = {"operation": "execute_import", "params": import_params("big", ndjson(rows(100_000)))}
        progress: list[float] = []
        final: dict[str, Any] = {}
        cancelled = threading.Event()
        for message in follow(on_a, arguments, "rep-1"):
            if message.get("method") == "notifications/progress":
                progress.append(message["params"]["progress"])
                if progress[-1] >= 20_000 and not cancelled.is_set():
                    running = on_c.call(READ, "list_executions", status="running")["data"]["items"]
                    assert len(running) == 1
                    stopped = on_b.call(EXECUTE, "cancel_execution", execution_id=running[0]["execution_id"])
                    assert stopped["data"]["status"] == "cancelled"
                    cancelled.set()
            elif "result" in message:
                final = message["result"]["structuredContent"]["data"]
        assert cancelled.is_set()
        assert progress == sorted(set(progress))
        # The call that followed its execution answers with the state it ended in.
        assert final["status"] == "cancelled"
        done = settled(on_c, final["execution_id"])
        current = done["progress"]["current"]
        assert 20_000 <= current < 100_000
        assert current % 1000 == 0
        assert done == {**done, "status": "cancelled", "imported": current}
        assert record_count(on_c, "big") == current
        assert record_count(on_b, "big") == current


def test_an_export_started_on_a_is_read_on_c_as_execution_and_resource(replicas: Replicas) -> None:
    a, _, c = replicas.servers
    with on(a, replicas, "tenant-2") as on_a, on(c, replicas, "tenant-2") as on_c:
        assert on_a.call(CREATE, "create_collection", collection="few")["success"]
        imported = on_a.call(EXECUTE, "execute_import", **import_params("few", ndjson(rows(1000))))["data"]
        assert settled(on_c, imported["execution_id"])["imported"] == 1000
        started = on_a.call(EXECUTE, "execute_export", collection="few")["data"]
        done = settled(on_c, started["execution_id"])
        assert (done["status"], done["result"]["exported"]) == ("completed", 1000)
        uri = done["result"]["uri"]
        read = on_c.http.post(
            "/mcp",
            json={"jsonrpc": "2.0", "id": 5, "method": "resources/read", "params": {"uri": uri}},
            headers=on_c.headers,
        ).json()
        assert len(read["result"]["contents"][0]["text"].splitlines()) == 1000
    with on(c, replicas, "tenant-3") as stranger:
        denied = stranger.http.post(
            "/mcp",
            json={"jsonrpc": "2.0", "id": 6, "method": "resources/read", "params": {"uri": uri}},
            headers=stranger.headers,
        ).json()
        assert denied["error"]["code"] == -32002


def test_an_import_on_a_replica_that_died_fails_on_another_and_a_retry_there_finishes_it(
    lone_database: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A replica whose heartbeat stopped is gone: what it ran becomes failed with the reason."""
    root = tmp_path_factory.mktemp("execution-death")
    # No takeover (executions.max_takeovers 0): the lease's end fails it, and a retry resumes it. A
    # pause between batches keeps the import running for seconds, so the kill comes before its end.
    env = {**ENV, "AQL_MCP_EXECUTIONS__MAX_TAKEOVERS": "0", "AQL_MCP_EXECUTIONS__BATCH_PAUSE_SECONDS": "0.05"}
    with start_replicas(root, lone_database, count=2, env=env) as pair:
        a, b = pair.servers
        with on(a, pair, "tenant-4") as on_a:
            assert on_a.call(CREATE, "create_collection", collection="c")["success"]
            started = on_a.call(EXECUTE, "execute_import", **import_params("c", ndjson(rows(100_000))))["data"]
        a.process.kill()
        a.process.wait()
        with on(b, pair, "tenant-4") as on_b:
            failed = settled(on_b, started["execution_id"], 90.0)
            assert failed["status"] == "failed"
            assert failed["error"]["details"]["reason"] == "replica_stopped"
            assert record_count(on_b, "c") == failed["progress"]["current"]
            assert failed["progress"]["current"] % 1000 == 0
            resumed = on_b.call(EXECUTE, "retry_execution", execution_id=started["execution_id"])["data"]
            assert resumed["status"] == "running"
            done = settled(on_b, started["execution_id"], 120.0)
            assert (done["status"], done["imported"]) == ("completed", 100_000)
            assert record_count(on_b, "c") == 100_000
