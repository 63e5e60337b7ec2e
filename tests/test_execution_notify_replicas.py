"""Task status notifications of executions across two `aql-mcp serve` replicas sharing one
PostgreSQL (SEP-2663, "Task Status Notifications"; docs/executions.md, "MCP tasks (2026-07-28)"):
the owner listens on replica B for an import that replica A runs, and hears it end, as `tasks/get`
answers it: completed when A's worker finishes it, cancelled when a third call cancels it on A.
The change is made on A and reaches B through the store's bus.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest

from tests.support.executions import BIG, CREATE, EXECUTE, import_params, ndjson, rows
from tests.support.listen import LISTEN, SUBSCRIPTION_ID, ListenStream
from tests.support.modern import modern_body, modern_headers
from tests.support.replicas import Replica, Replicas, start_replicas
from tests.support.tasks import call, get, meta, post, result_of

pytestmark = pytest.mark.anyio
DEADLINE = 60.0
ENDS = ("completed", "failed", "cancelled")
ENV = {
    **BIG,
    "AQL_MCP_MCP__MODERN_ERA": "true",
    # Batches of 100 rows, each followed by a pause: an import of thousands of rows is seconds of
    # work, so it is still running when the stream opens and when the test cancels it.
    "AQL_MCP_EXECUTIONS__BATCH_SIZE": "100",
    "AQL_MCP_EXECUTIONS__BATCH_PAUSE_SECONDS": "0.05",
}


@pytest.fixture(scope="module")
def replicas(database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Replicas]:
    with start_replicas(tmp_path_factory.mktemp("execution-notify"), database, count=2, env=ENV) as started:
        yield started


def start_import(at: Replica, caller: str, count: int) -> str:
    created = call(at, CREATE, {"operation": "create_collection", "params": {"collection": "c"}}, caller)
    assert created["structuredContent"]["success"], created
    arguments = {"operation": "execute_import", "params": import_params("c", ndjson(rows(count)))}
    started = call(at, EXECUTE, arguments, caller)
    assert started["resultType"] == "task", started
    return str(started["taskId"])


async def listen(http: httpx.AsyncClient, at: Replica, caller: str, task_id: str) -> httpx.Response:
    body = modern_body(LISTEN, {"notifications": {"taskIds": [task_id]}}, meta(), 31)
    request = http.build_request("POST", at.url, json=body, headers=modern_headers(at.token(caller), LISTEN))
    return await http.send(request, stream=True)


async def heard_until_end(stream: ListenStream) -> list[dict[str, Any]]:
    """The task notifications written, up to the first that says the task ended."""
    heard: list[dict[str, Any]] = []
    while not heard or heard[-1]["status"] not in ENDS:
        message = await stream.next(DEADLINE)
        assert message["method"] == "notifications/tasks", message
        assert message["params"]["_meta"] == {SUBSCRIPTION_ID: 31}
        heard.append({key: value for key, value in message["params"].items() if key != "_meta"})
    return heard


def as_notified(task: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in task.items() if key not in ("resultType", "_meta")}


async def test_a_listen_stream_on_one_replica_hears_an_import_on_the_other_complete(replicas: Replicas) -> None:
    a, b = (Replica(server, replicas) for server in replicas.servers)
    caller = "notified-" + secrets.token_hex(3)
    task_id = await anyio.to_thread.run_sync(lambda: start_import(a, caller, 5000))
    async with httpx.AsyncClient(timeout=DEADLINE) as http:
        response = await listen(http, b, caller, task_id)
        try:
            stream = ListenStream(response)
            assert (await stream.next())["params"]["notifications"] == {"taskIds": [task_id]}
            heard = await heard_until_end(stream)
        finally:
            await response.aclose()
    # Its state when the stream opened (50 paced batches: seconds of work), then its end.
    assert [task["status"] for task in heard] == ["working", "completed"], heard[-1]
    assert heard[-1]["result"]["structuredContent"]["data"]["imported"] == 5000
    assert heard[-1] == as_notified(await anyio.to_thread.run_sync(lambda: get(b, task_id, caller)))


async def test_a_listen_stream_on_one_replica_hears_an_import_cancelled_on_the_other(replicas: Replicas) -> None:
    a, b = (Replica(server, replicas) for server in replicas.servers)
    caller = "cancelled-" + secrets.token_hex(3)
    task_id = await anyio.to_thread.run_sync(lambda: start_import(a, caller, 10_000))
    async with httpx.AsyncClient(timeout=DEADLINE) as http:
        response = await listen(http, b, caller, task_id)
        try:
            stream = ListenStream(response)
            assert (await stream.next())["params"]["notifications"] == {"taskIds": [task_id]}
            now = await stream.next(DEADLINE)  # its state when the stream opened
            assert now["params"]["status"] == "working", now
            cancel = {"taskId": task_id}
            acked = await anyio.to_thread.run_sync(lambda: post(a, "tasks/cancel", cancel, caller=caller))
            assert result_of(acked)["resultType"] == "complete"
            heard = await heard_until_end(stream)
        finally:
            await response.aclose()
    # The batches written meanwhile told nothing: the one status change is the one notification.
    assert [task["status"] for task in heard] == ["cancelled"]
    assert heard[-1] == as_notified(await anyio.to_thread.run_sync(lambda: get(b, task_id, caller)))
