"""`subscriptions/listen` against a real `aql-mcp serve --dev` on SQLite, one replica (MCP 2026-07-28
basic/patterns/subscriptions; docs/eras.md, "Subscriptions in the modern era").

Absence is never waited for: a stream that must not hear of a change is then sent a change it
asked for, and that one must come first.
"""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from tests.support.asgi import MCP_HEADERS, initialize_params, rpc
from tests.support.listen import (
    DEADLINE,
    LISTEN,
    META,
    SUBSCRIPTION_ID,
    ListenStream,
    call_tool,
    listen_body,
    open_listen,
)
from tests.support.modern import modern_body, modern_headers
from tests.support.server import ServerProcess, start_server
from tests.support.wait import INTERVAL

pytestmark = pytest.mark.anyio

WATCHED = "test://watched-resource"
GUARDED = "test://static-binary"
ACK = "notifications/subscriptions/acknowledged"
MODERN = {"AQL_MCP_MCP__MODERN_ERA": "true"}


@pytest.fixture(scope="module")
def modern_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    env = {
        **MODERN,
        "AQL_MCP_STREAMS__KEEPALIVE_SECONDS": "0.3",
        "AQL_MCP_STREAMS__MAX_LISTEN_RESOURCES": "3",
        "AQL_MCP_AUTH__POLICY__RESOURCES": f'{{"{GUARDED}": ["secret"]}}',
    }
    with start_server(tmp_path_factory.mktemp("listen"), env=env) as process:
        yield process


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=DEADLINE) as client:
        yield client


async def acknowledged(stream: ListenStream) -> dict[str, Any]:
    assert stream.response.status_code == 200
    assert stream.response.headers["content-type"].startswith("text/event-stream")
    first = await stream.next()
    assert first["method"] == ACK
    params: dict[str, Any] = first["params"]
    return params


def assert_refused(response: httpx.Response, status: int, code: int, message_id: int | str = 7) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert body["id"] == message_id
    assert body["error"]["code"] == code
    assert "traceback" not in response.text.lower()
    assert "/src/" not in response.text
    error: dict[str, Any] = body["error"]
    return error


async def post_listen(
    http: httpx.AsyncClient, server: ServerProcess, notifications: Any, token: str | None = None
) -> httpx.Response:
    headers = modern_headers(token or server.token(), LISTEN)
    return await http.post(server.url, json=listen_body(notifications), headers=headers)


# The stream -------------------------------------------------------------------------------------


async def test_the_first_message_acknowledges_the_filter_with_the_requests_id(
    modern_server: ServerProcess, http: httpx.AsyncClient
) -> None:
    """Subscriptions, "Acknowledgment": first message, the subscription id in `_meta`, the subset honoured."""
    wanted = {"toolsListChanged": True, "promptsListChanged": False, "resourceSubscriptions": [WATCHED, WATCHED]}
    async with open_listen(http, modern_server.url, modern_server.token(), wanted, message_id="sub-1") as stream:
        params = await acknowledged(stream)

    assert params["_meta"] == {SUBSCRIPTION_ID: "sub-1"}
    assert params["notifications"] == {"toolsListChanged": True, "resourceSubscriptions": [WATCHED]}


async def test_a_tools_list_change_reaches_the_stream_tagged_with_its_subscription_id(
    modern_server: ServerProcess, http: httpx.AsyncClient
) -> None:
    token = modern_server.token()
    async with open_listen(http, modern_server.url, token, {"toolsListChanged": True}, message_id=41) as stream:
        await acknowledged(stream)
        assert (await call_tool(http, modern_server.url, token, "test_trigger_tool_change")).status_code == 200
        change = await stream.next()

    assert change["method"] == "notifications/tools/list_changed"
    assert change["params"]["_meta"] == {SUBSCRIPTION_ID: 41}
    assert "id" not in change


async def test_a_stream_hears_only_the_notification_types_it_asked_for(
    modern_server: ServerProcess, http: httpx.AsyncClient
) -> None:
    """Subscriptions, "Opening a Stream": the server MUST NOT send types the client did not request."""
    token = modern_server.token()
    async with open_listen(http, modern_server.url, token, {"promptsListChanged": True}) as stream:
        await acknowledged(stream)
        await call_tool(http, modern_server.url, token, "test_trigger_tool_change")
        await call_tool(http, modern_server.url, token, "test_update_watched_resource")
        await call_tool(http, modern_server.url, token, "test_trigger_prompt_change")
        first = await stream.next()

    assert first["method"] == "notifications/prompts/list_changed"


async def test_a_resource_update_reaches_only_the_streams_watching_that_uri(
    modern_server: ServerProcess, http: httpx.AsyncClient
) -> None:
    token = modern_server.token()
    url = modern_server.url
    async with (
        open_listen(http, url, token, {"resourceSubscriptions": [WATCHED]}, message_id=1) as watching,
        open_listen(
            http, url, token, {"resourceSubscriptions": ["test://static-text"], "toolsListChanged": True}
        ) as other,
    ):
        await acknowledged(watching)
        await acknowledged(other)
        await call_tool(http, url, token, "test_update_watched_resource")
        update = await watching.next()
        await call_tool(http, url, token, "test_trigger_tool_change")
        first_of_other = await other.next()

    assert update["method"] == "notifications/resources/updated"
    assert update["params"] == {"_meta": {SUBSCRIPTION_ID: 1}, "uri": WATCHED}
    assert first_of_other["method"] == "notifications/tools/list_changed"


async def test_the_trigger_really_changes_the_tool_list(modern_server: ServerProcess, http: httpx.AsyncClient) -> None:
    token = modern_server.token()

    async def names() -> set[str]:
        body = modern_body("tools/list", {}, META, 3)
        answer = await http.post(modern_server.url, json=body, headers=modern_headers(token, "tools/list"))
        return {tool["name"] for tool in answer.json()["result"]["tools"]}

    before = await names()
    await call_tool(http, modern_server.url, token, "test_trigger_tool_change")
    after = await names()

    assert before ^ after == {"test_dynamic_tool"}


async def test_a_quiet_stream_carries_keep_alive_comments(
    modern_server: ServerProcess, http: httpx.AsyncClient
) -> None:
    """Streamable HTTP, "Receiving Messages": a long-lived stream SHOULD carry SSE comments when quiet."""
    async with open_listen(http, modern_server.url, modern_server.token(), {"toolsListChanged": True}) as stream:
        with anyio.fail_after(DEADLINE):
            async for line in stream.response.aiter_lines():
                if line.startswith(":"):
                    break


async def test_server_discover_advertises_the_notifications_listen_delivers(
    modern_server: ServerProcess, http: httpx.AsyncClient
) -> None:
    body = modern_body("server/discover", {}, META, 2)
    answer = await http.post(
        modern_server.url, json=body, headers=modern_headers(modern_server.token(), "server/discover")
    )
    capabilities = answer.json()["result"]["capabilities"]

    assert capabilities["tools"] == {"listChanged": True}
    assert capabilities["prompts"] == {"listChanged": True}
    assert capabilities["resources"] == {"subscribe": True, "listChanged": True}


# Refusals ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "notifications",
    [
        None,
        [],
        "toolsListChanged",
        {"toolsListChanged": "yes"},
        {"promptsListChanged": 1},
        {"resourcesListChanged": None},
        {"resourceSubscriptions": WATCHED},
        {"resourceSubscriptions": [7]},
        {"resourceSubscriptions": [""]},
        {"resourceSubscriptions": ["test://a\u0000b"]},
        {"resourceSubscriptions": ["test://" + "a" * 3000]},
        {"resourceSubscriptions": ["test://1", "test://2", "test://3", "test://4"]},
    ],
)
async def test_a_malformed_filter_is_400_invalid_params(
    modern_server: ServerProcess, http: httpx.AsyncClient, notifications: Any
) -> None:
    response = await post_listen(http, modern_server, notifications)
    error = assert_refused(response, 400, -32602)
    assert error["data"]["field"].startswith("notifications")


async def test_a_subscription_to_an_unknown_resource_is_400_invalid_params(
    modern_server: ServerProcess, http: httpx.AsyncClient
) -> None:
    """2026-07-28 resources, "Error Handling": an unknown resource is -32602, as `resources/read` answers it."""
    response = await post_listen(http, modern_server, {"resourceSubscriptions": ["test://no-such-thing"]})
    error = assert_refused(response, 400, -32602)
    assert error["data"]["uri"] == "test://no-such-thing"


async def test_a_subscription_to_a_resource_the_caller_may_not_read_is_refused(
    modern_server: ServerProcess, http: httpx.AsyncClient
) -> None:
    """The same scope check as `resources/read` (`auth.policy.resources`): no stream for what one may not read."""
    response = await post_listen(http, modern_server, {"resourceSubscriptions": [GUARDED]})
    error = assert_refused(response, 200, -32000)
    assert error["data"]["reason"] == "insufficient_scope"

    allowed = modern_server.token(subject="reader", scopes=("mcp", "secret"))
    async with open_listen(http, modern_server.url, allowed, {"resourceSubscriptions": [GUARDED]}) as stream:
        assert (await acknowledged(stream))["notifications"] == {"resourceSubscriptions": [GUARDED]}


@pytest.mark.parametrize("authorization", [None, "Bearer not-a-token"])
async def test_listening_without_a_valid_token_is_401_with_a_challenge(
    modern_server: ServerProcess, http: httpx.AsyncClient, authorization: str | None
) -> None:
    headers = modern_headers("x", LISTEN)
    del headers["authorization"]
    if authorization is not None:
        headers["authorization"] = authorization
    response = await http.post(modern_server.url, json=listen_body({"toolsListChanged": True}), headers=headers)

    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer ")
    assert not response.headers["content-type"].startswith("text/event-stream")
    assert "traceback" not in response.text.lower()


async def test_a_listen_header_on_another_method_is_refused_and_cannot_dodge_the_concurrency_limit(
    modern_server: ServerProcess, http: httpx.AsyncClient
) -> None:
    """The rate limiter lets a listen POST hold no concurrency slot by its `Mcp-Method`; the modern
    edge refuses a body that names another method (2026-07-28 Streamable HTTP, "Server Validation")."""
    body = modern_body("tools/call", {"name": "test_simple_text", "arguments": {}}, META, 7)
    headers = {**modern_headers(modern_server.token(), LISTEN), "mcp-name": "test_simple_text"}
    response = await http.post(modern_server.url, json=body, headers=headers)

    assert_refused(response, 400, -32020)


# Caps and ends ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def capped_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    env = {
        **MODERN,
        "AQL_MCP_STREAMS__MAX_LISTENS": "2",
        "AQL_MCP_STREAMS__MAX_LISTENS_PER_PRINCIPAL": "1",
        "AQL_MCP_LIMITS__MAX_CONCURRENT_CALLS": "1",
    }
    with start_server(tmp_path_factory.mktemp("capped"), env=env) as process:
        yield process


async def test_a_caller_past_its_listen_cap_is_429_rate_limited_with_retry_after(
    capped_server: ServerProcess, http: httpx.AsyncClient
) -> None:
    token = capped_server.token(subject="greedy")
    async with open_listen(http, capped_server.url, token, {"toolsListChanged": True}) as held:
        await acknowledged(held)
        response = await post_listen(http, capped_server, {"toolsListChanged": True}, token)

    error = assert_refused(response, 429, -32003)
    assert response.headers["retry-after"] == str(error["data"]["retryAfter"])
    assert await metric(http, capped_server, 'aql_mcp_limit_events_total{kind="listens"}') >= 1


async def test_a_replica_past_its_listen_cap_is_503_with_retry_after(
    capped_server: ServerProcess, http: httpx.AsyncClient
) -> None:
    url = capped_server.url
    async with (
        open_listen(http, url, capped_server.token(subject="first"), {"toolsListChanged": True}) as one,
        open_listen(http, url, capped_server.token(subject="second"), {"toolsListChanged": True}) as two,
    ):
        await acknowledged(one)
        await acknowledged(two)
        response = await post_listen(
            http, capped_server, {"toolsListChanged": True}, capped_server.token(subject="third")
        )

    error = assert_refused(response, 503, -32006)
    assert response.headers["retry-after"] == str(error["data"]["retryAfter"])
    assert await metric(http, capped_server, 'aql_mcp_limit_events_total{kind="listen_table"}') >= 1


async def metric(http: httpx.AsyncClient, server: ServerProcess, series: str) -> float:
    text = (await http.get(f"{server.base}/metrics")).text
    return next(float(line.split()[-1]) for line in text.splitlines() if line.startswith(series + " "))


async def test_an_open_listen_stream_counts_among_the_open_sse_streams(
    capped_server: ServerProcess, http: httpx.AsyncClient
) -> None:
    async with open_listen(http, capped_server.url, capped_server.token(subject="counted"), {}) as stream:
        await acknowledged(stream)
        assert await metric(http, capped_server, "aql_mcp_open_sse_streams") >= 1


async def test_closing_a_stream_gives_its_slot_back(capped_server: ServerProcess, http: httpx.AsyncClient) -> None:
    """Cancellation: on Streamable HTTP closing the stream is the cancellation; the server frees what it held."""
    token = capped_server.token(subject="returner")
    async with open_listen(http, capped_server.url, token, {"toolsListChanged": True}) as stream:
        await acknowledged(stream)
    statuses: list[int] = []

    async def listen_once() -> None:
        async with open_listen(http, capped_server.url, token, {"toolsListChanged": True}) as again:
            statuses.append(again.response.status_code)

    # The server frees the slot when it sees the disconnect, which it may not have yet: polled.
    with anyio.fail_after(DEADLINE):
        await listen_once()
        while statuses[-1] != 200:
            await anyio.sleep(INTERVAL)
            await listen_once()
    assert 429 in statuses or statuses == [200]


async def test_an_open_stream_holds_no_concurrency_slot(capped_server: ServerProcess, http: httpx.AsyncClient) -> None:
    """`limits.max_concurrent_calls` is 1 here: a call still runs beside the caller's open stream."""
    token = capped_server.token(subject="busy")
    async with open_listen(http, capped_server.url, token, {"toolsListChanged": True}) as stream:
        await acknowledged(stream)
        answer = await call_tool(http, capped_server.url, token, "test_simple_text")

    assert answer.status_code == 200
    assert "result" in answer.json()


async def test_the_stream_ends_with_its_response_when_the_token_expires(
    modern_server: ServerProcess, http: httpx.AsyncClient
) -> None:
    """Subscriptions, "Graceful Closure": the server ending a subscription answers the listen request."""
    token = modern_server.token(subject="short-lived", ttl=2)
    async with open_listen(http, modern_server.url, token, {"toolsListChanged": True}, message_id=5) as stream:
        await acknowledged(stream)
        rest = await stream.rest()

    assert rest[-1] == {
        "jsonrpc": "2.0",
        "id": 5,
        "result": {"resultType": "complete", "_meta": {SUBSCRIPTION_ID: 5, **server_info(rest[-1])}},
    }


def server_info(response: dict[str, Any]) -> dict[str, Any]:
    info = response["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]
    assert info["name"]
    assert info["version"]
    return {"io.modelcontextprotocol/serverInfo": info}


async def test_sigterm_ends_every_stream_with_its_response_and_the_process_exits_0(tmp_path: Path) -> None:
    env = {**MODERN, "AQL_MCP_SHUTDOWN__DRAIN_SECONDS": "0.2", "AQL_MCP_SHUTDOWN__GRACE_SECONDS": "5"}
    with start_server(tmp_path, env=env) as server:
        async with (
            httpx.AsyncClient(timeout=DEADLINE) as http,
            open_listen(http, server.url, server.token(), {"toolsListChanged": True}, message_id=9) as stream,
        ):
            await acknowledged(stream)
            server.process.send_signal(signal.SIGTERM)
            rest = await stream.rest()
        code = await anyio.to_thread.run_sync(lambda: server.process.wait(timeout=15))

    assert rest[-1]["id"] == 9
    assert rest[-1]["result"]["resultType"] == "complete"
    assert rest[-1]["result"]["_meta"][SUBSCRIPTION_ID] == 9
    assert code == 0


async def test_a_legacy_session_is_not_offered_listen(modern_server: ServerProcess, http: httpx.AsyncClient) -> None:
    """`subscriptions/listen` is a 2026-07-28 method; a 2025-11-25 session has its GET stream instead."""
    headers = {**MCP_HEADERS, "authorization": f"Bearer {modern_server.token()}"}
    opened = await http.post(modern_server.url, json=rpc("initialize", initialize_params()), headers=headers)
    headers |= {"mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
    response = await http.post(modern_server.url, json=rpc(LISTEN, {"notifications": {}}, 7), headers=headers)

    assert_refused(response, 200, -32601)
