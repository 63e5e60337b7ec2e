"""Tasks across replicas sharing one PostgreSQL (docs/eras.md, "Tasks"): a task created on one
replica is read, answered and cancelled through another, as behind a gateway without affinity.

The replica that runs the task learns of answers and cancellation from the store alone (it is
not the replica those requests reached), so these tests pin the cross-replica path of
endpoint/modern/tasks_extension.py.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator

import pytest

from tests.support.replicas import Replica, Replicas, start_replicas
from tests.support.server import ServerProcess
from tests.support.tasks import call, get, post, result_of, settled
from tests.support.wait import until

MODERN = {"AQL_MCP_MCP__MODERN_ERA": "true"}


@pytest.fixture(scope="module")
def replicas(database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Replicas]:
    with start_replicas(tmp_path_factory.mktemp("task-replicas"), database, count=2, env=MODERN) as started:
        yield started


def stopped(server: ServerProcess, task_id: str) -> bool:
    """Whether the server's log (JSON lines) says it stopped the task's handler on a cancellation."""
    for line in server.log_text().splitlines():
        with contextlib.suppress(ValueError):
            entry = json.loads(line)
            if isinstance(entry, dict) and entry.get("event") == "task_stopped" and entry.get("task_id") == task_id:
                return bool(entry.get("reason") == "cancelled")
    return False


def pair(replicas: Replicas) -> tuple[Replica, Replica]:
    return Replica(replicas.servers[0], replicas), Replica(replicas.servers[1], replicas)


def test_a_task_created_on_one_replica_is_answered_through_another_and_completes(replicas: Replicas) -> None:
    a, b = pair(replicas)
    task_id = call(a, "confirm_delete", {"filename": "shared.txt"}, "alice")["taskId"]
    parked = settled(b, task_id, "alice", "input_required")
    assert list(parked["inputRequests"]) == ["confirm_delete"]
    answer = {"confirm_delete": {"action": "accept", "content": {"confirm": True}}}
    result_of(post(b, "tasks/update", {"taskId": task_id, "inputResponses": answer}, caller="alice"))
    done = settled(b, task_id, "alice")
    assert done["status"] == "completed"
    assert done["result"]["content"][0]["text"] == "Deleted shared.txt"
    assert get(a, task_id, "alice") == done


def test_a_task_running_on_one_replica_is_cancelled_through_another(replicas: Replicas) -> None:
    a, b = pair(replicas)
    task_id = call(a, "slow_compute", {"seconds": 60}, "bob")["taskId"]
    assert get(b, task_id, "bob")["status"] == "working"
    result_of(post(b, "tasks/cancel", {"taskId": task_id}, caller="bob"))
    assert settled(a, task_id, "bob")["status"] == "cancelled"
    # The replica running it learnt of the cancellation from the store and stopped the handler.
    until(lambda: stopped(a.server, task_id), "the running replica kept the handler")


def test_another_caller_finds_no_task_on_any_replica(replicas: Replicas) -> None:
    a, b = pair(replicas)
    task_id = call(a, "slow_compute", {"seconds": 0}, "carol")["taskId"]
    for server in (a, b):
        response = post(server, "tasks/get", {"taskId": task_id}, caller="mallory")
        assert response.status_code == 400
        assert response.json()["error"]["code"] == -32602
