"""Asking the client in the modern era (endpoint/modern/: endpoint.py, rounds.py, request_state.py, reply.py).

MCP 2026-07-28 basic/patterns/mrtr: a handler that needs input answers `input_required` with the
questions and a `requestState`; the client retries the same request with `inputResponses` and the
state echoed; state that fails verification is refused. Also the request-scoped stream of progress
and log messages (basic/patterns/progress, server/utilities/logging) and -32021 (basic, "Errors").
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from aql_mcp.auth.dev_issuer import DevIssuer
from aql_mcp.settings import Settings
from tests.support.asgi import CONFORMANCE, asgi_client, dev_settings
from tests.support.modern import MODERN, modern_body, modern_headers
from tests.support.modern import modern_error as error_of
from tests.support.replicas import SLOW

pytestmark = pytest.mark.anyio

CAPS = {"elicitation": {}, "sampling": {}, "roots": {}}
ALICE = {"action": "accept", "content": {"name": "Alice"}}


def meta(caps: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "rounds-tests", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": CAPS if caps is None else caps,
        **extra,
    }


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return dev_settings(
        tmp_path, mcp={"modern_era": True}, aql={"confirm_with_elicitation": True}, logging={"level": "warning"}
    )


@pytest.fixture
async def client(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(settings) as http:
        yield http


def mint(settings: Settings, subject: str = "tester") -> str:
    issuer = DevIssuer(state_dir=settings.store.path, issuer=settings.issuer, audience=settings.audience)
    return issuer.mint(subject=subject, scopes=["mcp"], ttl=600)


@pytest.fixture
def token(settings: Settings) -> str:
    return mint(settings)


async def call_tool(
    client: httpx.AsyncClient,
    token: str,
    name: str,
    arguments: dict[str, Any] | None = None,
    *,
    extra: dict[str, Any] | None = None,
    request_meta: dict[str, Any] | None = None,
    message_id: int = 7,
) -> httpx.Response:
    params = {"name": name, "arguments": arguments or {}, **(extra or {})}
    body = modern_body("tools/call", params, request_meta or meta(), message_id)
    return await client.post("/mcp", json=body, headers=modern_headers(token, "tools/call", name, arguments=arguments))


def result_of(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()["result"]
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"]
    return result


def events(response: httpx.Response) -> list[dict[str, Any]]:
    assert response.headers["content-type"].startswith("text/event-stream"), response.text
    return [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]


async def test_a_question_is_answered_input_required_and_the_retry_with_the_answer_completes(
    client: httpx.AsyncClient, token: str
) -> None:
    """mrtr "Basic Workflow": the questions and the state, then a retry (a new id) that completes."""
    first = result_of(await call_tool(client, token, "test_input_required_result_elicitation"))
    assert first["resultType"] == "input_required"
    assert first["inputRequests"]["user_name"]["method"] == "elicitation/create"
    assert isinstance(first["requestState"], str)
    retry = {"inputResponses": {"user_name": ALICE}, "requestState": first["requestState"]}
    done = result_of(
        await call_tool(client, token, "test_input_required_result_elicitation", extra=retry, message_id=8)
    )
    assert done["resultType"] == "complete"
    assert done["content"][0]["text"] == "Hello, Alice!"


async def test_a_second_round_carries_the_first_rounds_answers_in_a_new_state(
    client: httpx.AsyncClient, token: str
) -> None:
    name = "test_input_required_result_multi_round"
    one = result_of(await call_tool(client, token, name))
    step1 = {"inputResponses": {"step1": ALICE}, "requestState": one["requestState"]}
    two = result_of(await call_tool(client, token, name, extra=step1))
    assert set(two["inputRequests"]) == {"step2"}
    assert two["requestState"] != one["requestState"]
    blue = {"action": "accept", "content": {"color": "blue"}}
    step2 = {"inputResponses": {"step2": blue}, "requestState": two["requestState"]}
    done = result_of(await call_tool(client, token, name, extra=step2))
    assert done["content"][0]["text"] == "Alice likes blue"


@pytest.mark.parametrize("change", ["tampered", "caller", "request"])
async def test_a_state_that_fails_verification_is_invalid_params_400(
    client: httpx.AsyncClient, token: str, settings: Settings, change: str
) -> None:
    """mrtr "Server Requirements": state that fails verification MUST be rejected; it binds the
    principal and the request."""
    first = result_of(await call_tool(client, token, "test_input_required_result_tampered_state"))
    state, caller, tool = first["requestState"], token, "test_input_required_result_tampered_state"
    if change == "tampered":
        state += "-TAMPERED"
    elif change == "caller":
        caller = mint(settings, "mallory")
    else:
        tool = "test_input_required_result_request_state"
    retry = {"inputResponses": {"confirm": {"action": "accept", "content": {"ok": True}}}, "requestState": state}
    error = error_of(await call_tool(client, caller, tool, extra=retry, message_id=41), 400, -32602)
    assert error["data"]["field"] == "requestState"
    assert error["data"]["reason"] == change
    assert state not in json.dumps(error)


async def test_answers_of_the_wrong_shape_are_invalid_params(client: httpx.AsyncClient, token: str) -> None:
    """mrtr "Error Handling": the server SHOULD validate InputResponses."""
    for responses, field in (({"user_name": 12345}, "inputResponses.user_name"), (None, "inputResponses")):
        extra = {"inputResponses": responses}
        response = await call_tool(client, token, "test_input_required_result_elicitation", extra=extra, message_id=41)
        assert error_of(response, 400, -32602)["data"]["field"] == field


async def test_only_declared_capabilities_are_asked(client: httpx.AsyncClient, token: str) -> None:
    """mrtr: servers MUST NOT send an inputRequest the client has not declared support for."""
    response = await call_tool(
        client, token, "test_input_required_result_capabilities", request_meta=meta({"sampling": {}})
    )
    asked = result_of(response)["inputRequests"]
    assert {request["method"] for request in asked.values()} == {"sampling/createMessage"}


async def test_a_tool_needing_an_undeclared_capability_is_missing_capability_400(
    client: httpx.AsyncClient, token: str
) -> None:
    """2026-07-28 basic: -32021 with `data.requiredCapabilities` a ClientCapabilities object; HTTP 400."""
    response = await call_tool(client, token, "test_missing_capability", request_meta=meta({}), message_id=41)
    assert error_of(response, 400, -32021)["data"]["requiredCapabilities"] == {"sampling": {}}


async def test_list_methods_never_answer_input_required(client: httpx.AsyncClient, token: str) -> None:
    body = modern_body("tools/list", {}, meta(), 3)
    listed = await client.post("/mcp", json=body, headers=modern_headers(token, "tools/list"))
    assert result_of(listed)["resultType"] == "complete"


async def test_progress_travels_on_the_requests_own_stream_before_the_result(
    client: httpx.AsyncClient, token: str
) -> None:
    """2026-07-28 progress: notifications for a request travel on its response stream."""
    response = await call_tool(client, token, "test_tool_with_progress", request_meta=meta(progressToken="p-1"))
    frames = events(response)
    progress = [frame["params"]["progress"] for frame in frames if frame.get("method") == "notifications/progress"]
    assert progress == [0, 50, 100]
    assert frames[-1]["id"] == 7
    assert frames[-1]["result"]["resultType"] == "complete"


async def test_log_messages_are_sent_only_at_or_above_the_requests_own_level(
    client: httpx.AsyncClient, token: str
) -> None:
    """2026-07-28 logging: a request without `logLevel` gets no log messages at all."""
    silent = await call_tool(client, token, "test_logging_tool")
    assert silent.headers["content-type"].startswith("application/json")
    warned = events(
        await call_tool(
            client, token, "test_logging_tool", request_meta=meta(**{"io.modelcontextprotocol/logLevel": "warning"})
        )
    )
    levels = [frame["params"]["level"] for frame in warned if frame.get("method") == "notifications/message"]
    assert levels == ["warning", "error"]


async def test_a_question_after_progress_still_ends_the_request_never_a_request_on_its_stream(
    client: httpx.AsyncClient, token: str
) -> None:
    frames = events(await call_tool(client, token, "test_streaming_elicitation", request_meta=meta(progressToken=1)))
    assert all("method" not in frame or frame["method"].startswith("notifications/") for frame in frames)
    assert frames[-1]["result"]["resultType"] == "input_required"


async def test_a_streaming_tool_needing_an_undeclared_capability_is_400_before_any_progress(
    client: httpx.AsyncClient, token: str
) -> None:
    """2026-07-28 basic, "Per-request protocol fields": a request that needs a capability the client
    did not declare is -32021, and on HTTP the status MUST be 400. The tool reports progress before
    it asks, so the need is checked before the handler runs (`Tool.client_capabilities`): a JSON
    400, never a 200 stream whose last event is the error."""
    response = await call_tool(
        client, token, "test_streaming_elicitation", request_meta=meta({"sampling": {}}, progressToken=1), message_id=9
    )
    assert response.headers["content-type"].startswith("application/json"), response.text
    error = error_of(response, 400, -32021, message_id=9)
    assert error["data"]["requiredCapabilities"] == {"elicitation": {}}


def confirm_answer(asked: dict[str, Any], accept: bool) -> dict[str, Any]:
    """The retry's MRTR fields answering the one confirmation question of `asked`."""
    ((key, _),) = asked["inputRequests"].items()
    answer = {"action": "accept", "content": {"confirm": True}} if accept else {"action": "decline"}
    return {"inputResponses": {key: answer}, "requestState": asked["requestState"]}


async def create_collections(client: httpx.AsyncClient, token: str, *names: str) -> None:
    for name in names:
        create = {"operation": "create_collection", "params": {"collection": name}}
        await call_tool(client, token, "mcp_aql_create", create)


async def collections(client: httpx.AsyncClient, token: str) -> set[str]:
    listed = result_of(await call_tool(client, token, "mcp_aql_read", {"operation": "list_collections", "params": {}}))
    return {item["name"] for item in listed["structuredContent"]["data"]["items"]}


async def test_a_dangerous_operation_is_confirmed_through_input_required(client: httpx.AsyncClient, token: str) -> None:
    """MCP-AQL gatekeeper with `aql.confirm_with_elicitation`: the confirmation is an elicitation,
    which the modern era asks with `input_required`; declining refuses, accepting runs it."""
    await create_collections(client, token, "old")
    delete = {"operation": "delete_collection", "params": {"collection": "old"}}
    asked = result_of(await call_tool(client, token, "mcp_aql_delete", delete))
    assert asked["resultType"] == "input_required"
    ((_, question),) = asked["inputRequests"].items()
    assert question["method"] == "elicitation/create"
    assert '"collection":"old"' in question["params"]["message"]
    declined = confirm_answer(asked, accept=False)
    refused = result_of(await call_tool(client, token, "mcp_aql_delete", delete, extra=declined))
    assert refused["structuredContent"]["error"]["code"] == "PERMISSION_DENIED"
    assert "old" in await collections(client, token)
    again = result_of(await call_tool(client, token, "mcp_aql_delete", delete))
    done = result_of(await call_tool(client, token, "mcp_aql_delete", delete, extra=confirm_answer(again, accept=True)))
    assert done["structuredContent"]["data"]["deleted"] is True


async def test_a_confirmed_retry_replayed_is_refused_and_runs_nothing(client: httpx.AsyncClient, token: str) -> None:
    """mrtr "Server Requirements": a state that must be used at most once is enforced server-side;
    a retried confirmation (a proxy or SDK resending it) cannot delete a second time."""
    await create_collections(client, token, "rep")
    delete = {"operation": "delete_collection", "params": {"collection": "rep"}}
    retry = confirm_answer(result_of(await call_tool(client, token, "mcp_aql_delete", delete)), accept=True)
    result_of(await call_tool(client, token, "mcp_aql_delete", delete, extra=retry))
    await create_collections(client, token, "rep")
    replayed = await call_tool(client, token, "mcp_aql_delete", delete, extra=retry, message_id=41)
    assert error_of(replayed, 400, -32602)["data"]["reason"] == "used"
    assert "rep" in await collections(client, token)


async def test_an_answer_sent_before_the_question_is_ignored(client: httpx.AsyncClient, token: str) -> None:
    """Only a verified state says what was asked: a confirmation cannot be supplied in advance."""
    await create_collections(client, token, "early")
    first = result_of(
        await call_tool(
            client, token, "mcp_aql_delete", {"operation": "delete_collection", "params": {"collection": "early"}}
        )
    )
    ((key, _),) = first["inputRequests"].items()
    early = {"inputResponses": {key: {"action": "accept", "content": {"confirm": True}}}}
    delete = {"operation": "delete_collection", "params": {"collection": "early"}}
    again = result_of(await call_tool(client, token, "mcp_aql_delete", delete, extra=early))
    assert again["resultType"] == "input_required"
    assert "early" in await collections(client, token)


async def test_each_item_of_a_batch_is_confirmed_by_its_own_answer(client: httpx.AsyncClient, token: str) -> None:
    """An accept given for one item never stands in for another's decline (or the reverse)."""
    await create_collections(client, token, "a", "b")
    batch = {
        "operations": [
            {"operation": "delete_collection", "params": {"collection": "a"}},
            {"operation": "delete_collection", "params": {"collection": "b"}},
        ]
    }
    first = result_of(await call_tool(client, token, "mcp_aql_delete", batch))
    second = result_of(await call_tool(client, token, "mcp_aql_delete", batch, extra=confirm_answer(first, True)))
    assert second["resultType"] == "input_required"
    assert set(second["inputRequests"]) != set(first["inputRequests"])
    done = result_of(await call_tool(client, token, "mcp_aql_delete", batch, extra=confirm_answer(second, False)))
    results = done["structuredContent"]["results"]
    assert results[0]["result"]["success"] is True
    assert results[1]["result"]["error"]["code"] == "PERMISSION_DENIED"
    assert await collections(client, token) >= {"b"}
    assert "a" not in await collections(client, token)


async def test_a_batch_item_that_asks_does_not_run_the_items_before_it_twice(
    client: httpx.AsyncClient, token: str
) -> None:
    """An answered retry replays the batch: items that ran before the question answer from the
    memo in the signed state instead of running again."""
    for collection in ("keep", "old"):
        create = {"operation": "create_collection", "params": {"collection": collection}}
        await call_tool(client, token, "mcp_aql_create", create)
    record = {"operation": "create_record", "params": {"collection": "keep", "data": {"n": 1}}}
    created = result_of(await call_tool(client, token, "mcp_aql_create", record))["structuredContent"]["data"]
    batch = {
        "operations": [
            {"operation": "delete_record", "params": {"collection": "keep", "id": created["id"]}},
            {"operation": "delete_collection", "params": {"collection": "old"}},
        ]
    }
    asked = result_of(await call_tool(client, token, "mcp_aql_delete", batch))
    ((key, _),) = asked["inputRequests"].items()
    yes = {
        "inputResponses": {key: {"action": "accept", "content": {"confirm": True}}},
        "requestState": asked["requestState"],
    }
    done = result_of(await call_tool(client, token, "mcp_aql_delete", batch, extra=yes))["structuredContent"]
    assert done["summary"] == {"total": 2, "succeeded": 2, "failed": 0}


async def test_an_input_required_round_is_counted_as_such_not_as_an_internal_error(
    client: httpx.AsyncClient, token: str
) -> None:
    """Operators' error ratios must not count a question to the client as a failure."""
    await call_tool(client, token, "test_input_required_result_elicitation")
    await call_tool(client, token, "test_missing_capability", request_meta=meta({}))
    exposition = (await client.get("/metrics")).text
    calls = [line for line in exposition.splitlines() if line.startswith("aql_mcp_calls_total{")]
    elicited = next(line for line in calls if 'tool="test_input_required_result_elicitation"' in line)
    missing = next(line for line in calls if 'tool="test_missing_capability"' in line)
    assert 'outcome="input_required"' in elicited
    assert 'outcome="client_error"' in missing
    assert not any('outcome="internal"' in line for line in calls)


async def test_a_streaming_answer_carries_keep_alive_comments_while_the_handler_works(tmp_path: Path) -> None:
    """In this era a closed connection cancels the request, so a proxy's idle timeout must not
    close a long call's stream: it gets a comment every `streams.keepalive_seconds`."""
    settings = dev_settings(
        tmp_path,
        mcp={"modern_era": True},
        server={"plugins": [CONFORMANCE, SLOW]},
        streams={"keepalive_seconds": 0.05},
    )
    async with asgi_client(settings) as http:
        response = await call_tool(
            http, mint(settings), "test_slow", {"steps": 4}, request_meta=meta(progressToken="p")
        )
    assert response.text.count(": keep-alive") >= 2
    assert events(response)[-1]["result"]["content"][0]["text"] == "done"


async def test_a_log_level_that_is_no_logging_level_is_invalid_params(client: httpx.AsyncClient, token: str) -> None:
    """2026-07-28 logging: `logLevel` is a LoggingLevel; "off" is not one."""
    response = await call_tool(
        client,
        token,
        "test_logging_tool",
        request_meta=meta(**{"io.modelcontextprotocol/logLevel": "off"}),
        message_id=41,
    )
    assert error_of(response, 400, -32602)["data"]["field"] == "_meta.io.modelcontextprotocol/logLevel"
