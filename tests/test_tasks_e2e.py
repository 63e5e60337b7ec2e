"""The Tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663) against a real `aql-mcp serve --dev`
with the modern era on (docs/eras.md, "Tasks"), through the conformance fixtures (testing/task_fixtures.py).

Each test is its own caller (its own token subject): tasks belong to their caller, so the tests
cannot see each other's tasks or use up each other's share of `mcp.max_tasks_per_principal`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.asgi import MCP_HEADERS, initialize_params, rpc
from tests.support.server import ServerProcess, start_server
from tests.support.tasks import DEADLINE, EXTENSION, call, get, post, result_of, settled

ISO = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$")
CAP = 3
TASK_ENV = {"AQL_MCP_MCP__MODERN_ERA": "true", "AQL_MCP_MCP__MAX_TASKS_PER_PRINCIPAL": str(CAP)}
ENVELOPE = ("taskId", "status", "result", "error", "inputRequests")


@pytest.fixture(scope="module")
def tasks_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with start_server(tmp_path_factory.mktemp("tasks"), env=TASK_ENV) as process:
        yield process


def error_of(response: httpx.Response, status: int, code: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error: dict[str, Any] = response.json()["error"]
    assert error["code"] == code
    assert "traceback" not in response.text.lower()
    assert "/" not in error["message"]
    return error


def test_a_task_tool_called_with_the_extension_answers_a_flat_task_that_completes_with_the_result(
    tasks_server: ServerProcess,
) -> None:
    """SEP-2663: CreateTaskResult is `Result & Task`; tasks/get inlines the result once completed."""
    created = call(tasks_server, "slow_compute", {"seconds": 0.2, "label": "e2e"}, "creator")
    assert created["resultType"] == "task"
    assert created["status"] == "working"
    assert ISO.match(created["createdAt"])
    assert ISO.match(created["lastUpdatedAt"])
    assert isinstance(created["ttlMs"], int)
    assert created["ttlMs"] > 0
    assert isinstance(created["pollIntervalMs"], int)
    for absent in ("task", "result", "error", "inputRequests", "requestState", "ttl", "pollInterval"):
        assert absent not in created
    done = settled(tasks_server, created["taskId"], "creator")
    assert done["status"] == "completed"
    assert done["resultType"] == "complete"
    assert done["result"]["content"][0]["text"] == "Computed e2e after 0.2s"
    assert "requestState" not in done
    assert "error" not in done


def test_a_plain_tool_and_a_request_without_the_extension_get_plain_results(tasks_server: ServerProcess) -> None:
    plain = call(tasks_server, "greet", {"name": "World"}, "plain")
    assert plain["resultType"] == "complete"
    assert plain["content"][0]["text"] == "Hello, World!"
    assert "taskId" not in plain
    undeclared = call(tasks_server, "slow_compute", {"seconds": 0}, "plain", caps={})
    assert undeclared["resultType"] == "complete"
    assert "taskId" not in undeclared


def test_a_required_task_tool_without_the_extension_is_32021_naming_it(tasks_server: ServerProcess) -> None:
    """SEP-2663 "Required Capabilities": -32021 with `requiredCapabilities.extensions`."""
    response = post(tasks_server, "tools/call", {"name": "failing_job", "arguments": {}}, caller="req", caps={})
    error = error_of(response, 400, -32021)
    assert error["data"]["requiredCapabilities"] == {"extensions": {EXTENSION: {}}}


def test_the_task_methods_without_the_extension_are_32021(tasks_server: ServerProcess) -> None:
    for method, params in (
        ("tasks/get", {"taskId": "t"}),
        ("tasks/update", {"taskId": "t", "inputResponses": {}}),
        ("tasks/cancel", {"taskId": "t"}),
    ):
        error = error_of(post(tasks_server, method, params, caller="gate", caps={}), 400, -32021)
        assert error["data"]["requiredCapabilities"]["extensions"] == {EXTENSION: {}}


def test_an_unknown_task_and_another_callers_task_are_both_invalid_params(tasks_server: ServerProcess) -> None:
    created = call(tasks_server, "slow_compute", {"seconds": 30}, "owner")
    task_id = created["taskId"]
    for method, params in (
        ("tasks/get", {"taskId": task_id}),
        ("tasks/update", {"taskId": task_id, "inputResponses": {}}),
        ("tasks/cancel", {"taskId": task_id}),
    ):
        error = error_of(post(tasks_server, method, params, caller="intruder"), 400, -32602)
        assert error["data"]["field"] == "taskId"
    error_of(post(tasks_server, "tasks/get", {"taskId": "no-such-task"}, caller="owner"), 400, -32602)
    # The intruder's cancel changed nothing.
    assert get(tasks_server, task_id, "owner")["status"] == "working"
    result_of(post(tasks_server, "tasks/cancel", {"taskId": task_id}, caller="owner"))


def test_tasks_result_and_tasks_list_were_removed_and_are_method_not_found(tasks_server: ServerProcess) -> None:
    error_of(post(tasks_server, "tasks/result", {"taskId": "t"}, caller="removed"), 404, -32601)
    error_of(post(tasks_server, "tasks/list", {}, caller="removed"), 404, -32601)


def test_an_mcp_name_that_is_not_the_task_id_is_a_header_mismatch(tasks_server: ServerProcess) -> None:
    """SEP-2663 "Routing Headers": the task methods mirror `taskId` in `Mcp-Name`."""
    response = post(tasks_server, "tasks/get", {"taskId": "abc"}, caller="headers", name="other")
    error_of(response, 400, -32020)


def test_a_task_that_asks_waits_in_input_required_and_resumes_after_all_answers(tasks_server: ServerProcess) -> None:
    """SEP-2663 partial fulfilment: answered keys leave `inputRequests`, the task waits for the rest."""
    task_id = call(tasks_server, "multi_input", {}, "asker")["taskId"]
    parked = settled(tasks_server, task_id, "asker", "input_required")
    assert set(parked["inputRequests"]) == {"first", "second"}
    assert parked["inputRequests"]["first"]["method"] == "elicitation/create"
    first = {"first": {"action": "accept", "content": {"name": "Ada"}}, "unasked": {"x": 1}}
    ack = result_of(post(tasks_server, "tasks/update", {"taskId": task_id, "inputResponses": first}, caller="asker"))
    assert ack["resultType"] == "complete"
    assert not set(ack) & set(ENVELOPE)
    waiting = get(tasks_server, task_id, "asker")
    assert waiting["status"] == "input_required"
    assert list(waiting["inputRequests"]) == ["second"]
    second = {"second": {"action": "accept", "content": {"name": "Grace"}}}
    result_of(post(tasks_server, "tasks/update", {"taskId": task_id, "inputResponses": second}, caller="asker"))
    done = settled(tasks_server, task_id, "asker")
    assert done["status"] == "completed"
    assert done["result"]["content"][0]["text"] == "Got Ada and Grace"


def test_an_answer_of_the_wrong_shape_is_invalid_params_and_changes_nothing(tasks_server: ServerProcess) -> None:
    task_id = call(tasks_server, "confirm_delete", {"filename": "a.txt"}, "shape")["taskId"]
    settled(tasks_server, task_id, "shape", "input_required")
    bad = {"taskId": task_id, "inputResponses": {"confirm_delete": {"action": "maybe"}}}
    error = error_of(post(tasks_server, "tasks/update", bad, caller="shape"), 400, -32602)
    assert error["data"]["field"] == "inputResponses.confirm_delete"
    not_a_map = {"taskId": task_id, "inputResponses": ["yes"]}
    error_of(post(tasks_server, "tasks/update", not_a_map, caller="shape"), 400, -32602)
    assert get(tasks_server, task_id, "shape")["status"] == "input_required"
    result_of(post(tasks_server, "tasks/cancel", {"taskId": task_id}, caller="shape"))
    assert settled(tasks_server, task_id, "shape")["status"] == "cancelled"


def test_cancelling_a_running_task_settles_cancelled_and_cancelling_again_is_the_same_ack(
    tasks_server: ServerProcess,
) -> None:
    task_id = call(tasks_server, "slow_compute", {"seconds": 60}, "canceller")["taskId"]
    for _ in range(2):
        ack = result_of(post(tasks_server, "tasks/cancel", {"taskId": task_id}, caller="canceller"))
        assert ack["resultType"] == "complete"
        assert not set(ack) & set(ENVELOPE)
    done = settled(tasks_server, task_id, "canceller")
    assert done["status"] == "cancelled"
    assert "result" not in done


def test_a_tool_error_is_completed_with_is_error_and_a_crash_is_failed_without_internals(
    tasks_server: ServerProcess,
) -> None:
    """SEP-2663 error semantics: `failed` is for protocol-level errors only."""
    tool_error = settled(tasks_server, call(tasks_server, "failing_job", {}, "errors")["taskId"], "errors")
    assert tool_error["status"] == "completed"
    assert tool_error["result"]["isError"] is True
    crash = settled(tasks_server, call(tasks_server, "protocol_error_job", {}, "errors")["taskId"], "errors")
    assert crash["status"] == "failed"
    assert crash["error"]["code"] == -32603
    assert "result" not in crash
    assert "fixture crash" not in str(crash)
    assert "Traceback" not in str(crash)


def test_a_caller_over_its_cap_of_live_tasks_is_429_until_one_ends(tasks_server: ServerProcess) -> None:
    ids = [call(tasks_server, "slow_compute", {"seconds": 60}, "capped")["taskId"] for _ in range(CAP)]
    response = post(tasks_server, "tools/call", {"name": "slow_compute", "arguments": {"seconds": 60}}, caller="capped")
    error = error_of(response, 429, -32003)
    assert error["data"]["limit"] == CAP
    assert response.headers["retry-after"] == str(error["data"]["retryAfter"])
    # Another caller is not affected.
    assert call(tasks_server, "slow_compute", {"seconds": 0}, "uncapped")["resultType"] == "task"
    result_of(post(tasks_server, "tasks/cancel", {"taskId": ids[0]}, caller="capped"))
    assert call(tasks_server, "slow_compute", {"seconds": 0}, "capped")["resultType"] == "task"
    for task_id in ids[1:]:
        result_of(post(tasks_server, "tasks/cancel", {"taskId": task_id}, caller="capped"))


def test_an_mrtr_round_before_the_task_feeds_the_task_its_answer(tasks_server: ServerProcess) -> None:
    """SEP-2663 with SEP-2322: round 1 is input_required, round 2 creates the task (no requestState)."""
    params: dict[str, Any] = {"name": "test_tool_with_task", "arguments": {}}
    first = result_of(post(tasks_server, "tools/call", params, caller="composer"))
    assert first["resultType"] == "input_required"
    assert "taskId" not in first
    retry = {
        **params,
        "inputResponses": {"user_name": {"action": "accept", "content": {"name": "Alice"}}},
        "requestState": first["requestState"],
    }
    created = result_of(post(tasks_server, "tools/call", retry, caller="composer"))
    assert created["resultType"] == "task"
    assert "requestState" not in created
    done = settled(tasks_server, created["taskId"], "composer")
    assert "Alice" in done["result"]["content"][0]["text"]


def test_discovery_advertises_the_extension(tasks_server: ServerProcess) -> None:
    caps = result_of(post(tasks_server, "server/discover", {}, caller="discover"))["capabilities"]
    # Beside the Skills extension (docs/discovery.md), which every server declares.
    assert caps["extensions"] == {EXTENSION: {}, "io.modelcontextprotocol/skills": {}}
    assert "tasks" not in caps


def test_a_replica_that_stops_with_running_tasks_marks_them_failed(tmp_path: Path) -> None:
    """A task cannot outlive the replica running it: stopping says so rather than leaving it working."""
    with start_server(tmp_path, env=TASK_ENV) as first:
        task_id = call(first, "slow_compute", {"seconds": 60}, "stopper")["taskId"]
    with start_server(tmp_path, env=TASK_ENV) as second:
        stopped = get(second, task_id, "stopper")
    assert stopped["status"] == "failed"
    assert stopped["error"]["code"] == -32006
    assert stopped["statusMessage"] == "shutdown"


def test_a_legacy_session_gets_plain_calls_and_no_task_methods(tasks_server: ServerProcess) -> None:
    """The extension belongs to 2026-07-28: a 2025-11-25 session declaring it changes nothing."""
    headers = {**MCP_HEADERS, "authorization": f"Bearer {tasks_server.token('legacy')}"}
    init = rpc("initialize", initialize_params(capabilities={"extensions": {EXTENSION: {}}}))
    opened = httpx.post(tasks_server.url, json=init, headers=headers, timeout=DEADLINE)
    assert opened.status_code == 200
    session = {**headers, "mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
    httpx.post(tasks_server.url, json=rpc("notifications/initialized", None, None), headers=session)
    called = rpc("tools/call", {"name": "slow_compute", "arguments": {"seconds": 0}}, 2)
    plain = httpx.post(tasks_server.url, json=called, headers=session, timeout=DEADLINE)
    assert plain.status_code == 200
    assert '"taskId"' not in plain.text
    assert "Computed" in plain.text
    missing = httpx.post(tasks_server.url, json=rpc("tasks/get", {"taskId": "x"}, 3), headers=session)
    assert missing.status_code == 200
    assert missing.json()["error"]["code"] == -32601
