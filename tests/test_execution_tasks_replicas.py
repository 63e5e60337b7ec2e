"""Executions as 2026-07-28 tasks across three replicas sharing one PostgreSQL (docs/executions.md,
"MCP tasks (2026-07-28)"): an import of 100,000 rows is started on replica A and followed as a task
through B and C, by a raw JSON-RPC client and by the official TypeScript client; another import is
cancelled midway through C while A runs it, and keeps whole batches only.

`executions.batch_pause_seconds` paces the imports (100 batches, each followed by a pause), so
"midway" is a matter of waiting for the progress, never of sleeping.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.executions import BIG, CREATE, EXECUTE, READ, import_params, ndjson, rows
from tests.support.replicas import Replica, Replicas, start_replicas
from tests.support.tasks import call, get, post, result_of
from tests.support.typescript import TypeScriptClient, install_ts_client
from tests.support.wait import until

ROWS, BATCH = 100_000, 1000
ENV = {
    **BIG,
    "AQL_MCP_MCP__MODERN_ERA": "true",
    "AQL_MCP_EXECUTIONS__BATCH_SIZE": str(BATCH),
    "AQL_MCP_EXECUTIONS__BATCH_PAUSE_SECONDS": "0.05",
    "AQL_MCP_EXECUTIONS__MAX_LIVE_PER_PRINCIPAL": "4",
}
SCRIPT = Path(__file__).with_name("ts_client_tasks.mjs")
FOLLOW_SECONDS = 120.0


@pytest.fixture(scope="module")
def replicas(database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Replicas]:
    with start_replicas(tmp_path_factory.mktemp("execution-task-replicas"), database, count=3, env=ENV) as started:
        yield started


@pytest.fixture(scope="module")
def payload(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The base64 NDJSON of 100,000 rows, once for the module (a file: too large for an argument)."""
    path = tmp_path_factory.mktemp("payload") / "rows.b64"
    path.write_text(ndjson(rows(ROWS)))
    return path


def three(replicas: Replicas) -> tuple[Replica, Replica, Replica]:
    a, b, c = (Replica(server, replicas) for server in replicas.servers)
    return a, b, c


def progress(task: dict[str, Any]) -> int:
    """Rows processed so far, as a working import's status message says ("importing rows (n of m)")."""
    found = re.search(r"\((\d+) of \d+\)", str(task.get("statusMessage", "")))
    return int(found.group(1)) if found else 0


def collection(a: Replica, caller: str, name: str) -> None:
    created = call(a, CREATE, {"operation": "create_collection", "params": {"collection": name}}, caller)
    assert created["structuredContent"]["success"], created


def record_count(a: Replica, caller: str, name: str) -> int:
    listed = call(a, READ, {"operation": "list_collections", "params": {}}, caller)["structuredContent"]["data"]
    return next(int(c["record_count"]) for c in listed["items"] if c["name"] == name)


def execution(a: Replica, caller: str, execution_id: str) -> dict[str, Any]:
    shown = call(a, READ, {"operation": "get_execution", "params": {"execution_id": execution_id}}, caller)
    data: dict[str, Any] = shown["structuredContent"]["data"]
    return data


def start_import(a: Replica, caller: str, name: str, content: str) -> dict[str, Any]:
    arguments = {"operation": "execute_import", "params": import_params(name, content)}
    created = call(a, EXECUTE, arguments, caller)
    assert created["resultType"] == "task", created
    return created


def follow(
    pollers: tuple[Replica, ...], task_id: str, caller: str, *, until_rows: int | None = None
) -> list[dict[str, Any]]:
    """`tasks/get` on each poller in turn until the task ended (or processed `until_rows` rows)."""
    seen: list[dict[str, Any]] = []

    def reached() -> bool:
        task = get(pollers[len(seen) % len(pollers)], task_id, caller)
        seen.append(task)
        if until_rows is not None and progress(task) >= until_rows:
            return True
        return task["status"] in ("completed", "failed", "cancelled")

    until(reached, f"task {task_id} did not get there", seconds=FOLLOW_SECONDS)
    return seen


def assert_rising(seen: list[dict[str, Any]]) -> None:
    counts = [progress(task) for task in seen if task["status"] == "working"]
    assert counts == sorted(counts), counts
    assert len({count for count in counts if 0 < count < ROWS}) >= 2, counts


def test_a_raw_client_follows_an_import_of_100000_rows_across_three_replicas(replicas: Replicas, payload: Path) -> None:
    a, b, c = three(replicas)
    collection(a, "raw", "big")
    created = start_import(a, "raw", "big", payload.read_text())
    seen = follow((b, c), created["taskId"], "raw")
    assert_rising(seen)
    done = seen[-1]
    assert done["status"] == "completed", done
    data = done["result"]["structuredContent"]["data"]
    assert (data["execution_id"], data["imported"], data["rejected"]) == (created["taskId"], ROWS, 0)
    assert record_count(a, "raw", "big") == ROWS
    assert execution(c, "raw", created["taskId"])["status"] == "completed"


def test_a_raw_client_cancels_an_import_midway_through_another_replica(replicas: Replicas, payload: Path) -> None:
    a, b, c = three(replicas)
    collection(a, "raw-cancel", "halted")
    created = start_import(a, "raw-cancel", "halted", payload.read_text())
    follow((b,), created["taskId"], "raw-cancel", until_rows=2 * BATCH)
    acked = result_of(post(c, "tasks/cancel", {"taskId": created["taskId"]}, caller="raw-cancel"))
    assert acked["resultType"] == "complete"
    ended = follow((b, c), created["taskId"], "raw-cancel")[-1]
    assert ended["status"] == "cancelled", ended
    assert_whole_batches(a, "raw-cancel", "halted", created["taskId"])


def assert_whole_batches(a: Replica, caller: str, name: str, execution_id: str) -> None:
    shown = execution(a, caller, execution_id)
    assert shown["status"] == "cancelled"
    kept = shown["progress"]["current"] - shown["rejected"]
    assert 0 < kept < ROWS
    assert kept % BATCH == 0
    assert record_count(a, caller, name) == kept


@pytest.fixture(scope="module")
def ts_client() -> TypeScriptClient:
    return install_ts_client()


def run_ts(client: TypeScriptClient, replicas: Replicas, payload: Path, caller: str, name: str, mode: str) -> Any:
    env = {
        **os.environ,
        "TS_CLIENT_PACKAGE": client.package,
        "MCP_URLS": ",".join(server.url for server in replicas.servers),
        "MCP_TOKEN": replicas.token(caller),
        "COLLECTION": name,
        "PAYLOAD_FILE": str(payload),
        "MODE": mode,
        "CANCEL_AT": str(2 * BATCH),
    }
    done = subprocess.run([client.node, str(SCRIPT)], env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, f"the client failed:\n{done.stderr}"
    return json.loads(done.stdout)


@pytest.mark.parametrize("mode", ["complete", "cancel"])
def test_the_typescript_client_follows_an_import_across_three_replicas(
    replicas: Replicas, payload: Path, ts_client: TypeScriptClient, mode: str
) -> None:
    a, _, _ = three(replicas)
    caller, name = f"ts-{mode}", f"ts_{mode}"
    collection(a, caller, name)
    summary = run_ts(ts_client, replicas, payload, caller, name, mode)
    assert summary["era"] == "modern"
    # 2.4.0 has no result type for a task yet: its callTool rejects the CreateTaskResult, which the
    # script reads from the wire; tasks/get and tasks/cancel go through its request().
    assert summary["callError"]["code"] == "UNSUPPORTED_RESULT_TYPE"
    created = summary["created"]
    assert (created["resultType"], created["status"]) == ("task", "working")
    task_id = created["taskId"]
    polls = summary["polls"]
    assert {poll["replica"] for poll in polls} == {1, 2}
    assert all(poll["mcpName"] == task_id for poll in polls)
    final = polls[-1]["task"]
    if mode == "complete":
        assert_rising([poll["task"] for poll in polls])
        assert final["status"] == "completed", final
        assert final["result"]["structuredContent"]["data"]["imported"] == ROWS
        assert record_count(a, caller, name) == ROWS
    else:
        assert summary["cancelledOn"] == 2
        assert final["status"] == "cancelled", final
        assert_whole_batches(a, caller, name, task_id)
