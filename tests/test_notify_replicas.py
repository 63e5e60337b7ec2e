"""Notifications across `aql-mcp serve` replicas sharing one PostgreSQL (issue 26).

A legacy (2025-11-25) session's GET stream is held by one replica; a change made on another must
reach it, once: a tool added on replica A is `notifications/tools/list_changed` on the GET stream
held by replica B (endpoint/notifier.py, docs/eras.md "Changes from any replica"). A task running
on replica A reports its status changes to its owner's `subscriptions/listen` stream on replica B
(SEP-2663 task status notifications; docs/eras.md, "Tasks"). A stream followed on one replica
ends promptly, with an error for its request, when the replica running that request is killed
(docs/connections.md, "A stream whose replica died").
"""

from __future__ import annotations

import secrets
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import ClientSession, types
from mcp.client import IncomingMessage
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT

from tests.support.asgi import MCP_HEADERS, rpc
from tests.support.listen import LISTEN, SUBSCRIPTION_ID, ListenStream
from tests.support.modern import modern_body, modern_headers
from tests.support.replicas import Replica, Replicas, start_replicas, wait_for_replica_count
from tests.support.sse import iter_events
from tests.support.tasks import WITH_TASKS, call, meta, post, result_of

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning"),
]

DEADLINE = 10.0
WATCHED = "test://watched-resource"
TOOLS_CHANGED = "notifications/tools/list_changed"
PROMPTS_CHANGED = "notifications/prompts/list_changed"


@pytest.fixture(scope="module")
def replicas(database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Replicas]:
    env = {"AQL_MCP_MCP__MODERN_ERA": "true"}
    with start_replicas(tmp_path_factory.mktemp("notify-replicas"), database, count=2, env=env) as started:
        wait_for_replica_count(started, 2)
        yield started


class Legacy:
    """A 2025-11-25 session over plain HTTP, each request sent to the replica the test names."""

    def __init__(self, replicas: Replicas, http: httpx.AsyncClient) -> None:
        self.replicas = replicas
        self.http = http
        subject = "notified-" + secrets.token_hex(3)
        self.headers = {**MCP_HEADERS, "authorization": f"Bearer {replicas.token(subject)}"}

    def url(self, replica: int) -> str:
        return self.replicas.servers[replica].url

    async def open(self, replica: int) -> None:
        hello = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}
        answer = await self.http.post(self.url(replica), json=rpc("initialize", hello), headers=self.headers)
        assert answer.status_code == 200, answer.text
        self.headers |= {"mcp-session-id": answer.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
        await self.post(replica, rpc("notifications/initialized", message_id=None))

    async def post(self, replica: int, message: dict[str, Any]) -> httpx.Response:
        return await self.http.post(self.url(replica), json=message, headers=self.headers)

    async def call(self, replica: int, tool: str) -> None:
        answer = await self.post(replica, rpc("tools/call", {"name": tool, "arguments": {}}, message_id=2))
        assert answer.status_code == 200, answer.text
        assert "error" not in answer.json(), answer.text


@pytest.fixture
async def legacy(replicas: Replicas) -> AsyncIterator[Legacy]:
    async with httpx.AsyncClient(timeout=DEADLINE) as http:
        yield Legacy(replicas, http)


async def test_a_tool_added_on_one_replica_reaches_a_get_stream_held_by_the_other_once(
    legacy: Legacy, replicas: Replicas
) -> None:
    """The session lives on B alone (opened there, its GET stream there); another caller changes
    the tool list on A, then the prompt list on B: B's stream hears each once, in order (an echo
    would repeat the tool change)."""
    other = Legacy(replicas, legacy.http)
    await other.open(0)
    await legacy.open(1)
    get_headers = {**legacy.headers, "accept": "text/event-stream"}
    async with legacy.http.stream("GET", legacy.url(1), headers=get_headers) as stream:
        assert stream.status_code == 200
        events = aiter(iter_events(stream))
        heard: list[str] = []
        with anyio.fail_after(DEADLINE):
            assert not (await anext(events)).data  # priming: the stream is attached on B
            await other.call(0, "test_trigger_tool_change")
            heard.append((await anext(events)).message["method"])
            await other.call(1, "test_trigger_prompt_change")
            heard.append((await anext(events)).message["method"])
            await other.call(0, "test_update_watched_resource")  # not subscribed: nothing comes
            await other.call(0, "test_trigger_tool_change")
            heard.append((await anext(events)).message["method"])
    assert heard == [TOOLS_CHANGED, PROMPTS_CHANGED, TOOLS_CHANGED]


async def test_a_resource_update_on_one_replica_reaches_a_subscribed_get_stream_on_the_other(legacy: Legacy) -> None:
    await legacy.open(1)
    assert (await legacy.post(1, rpc("resources/subscribe", {"uri": WATCHED}))).status_code == 200
    get_headers = {**legacy.headers, "accept": "text/event-stream"}
    async with legacy.http.stream("GET", legacy.url(1), headers=get_headers) as stream:
        events = aiter(iter_events(stream))
        with anyio.fail_after(DEADLINE):
            assert not (await anext(events)).data
            await legacy.call(0, "test_update_watched_resource")
            updated = (await anext(events)).message
            await legacy.call(0, "test_trigger_prompt_change")
            after = (await anext(events)).message
    assert updated == {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": WATCHED}}
    assert after["method"] == PROMPTS_CHANGED


async def test_the_official_client_hears_a_tool_added_on_a_replica_it_never_talked_to(
    legacy: Legacy, replicas: Replicas
) -> None:
    """The official client talks to B only; another caller changes the tool list on A, then the
    prompt list: the client's handler hears each once. Resource updates are written first until one
    arrives, so the client's GET stream is known to be attached."""
    changed: list[str] = []
    updated = anyio.Event()
    prompts = anyio.Event()

    async def on_message(message: IncomingMessage) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            updated.set()
        elif isinstance(message, types.ToolListChangedNotification | types.PromptListChangedNotification):
            changed.append(message.method)
            if isinstance(message, types.PromptListChangedNotification):
                prompts.set()

    await legacy.open(0)
    http = httpx2.AsyncClient(
        headers={"authorization": f"Bearer {replicas.token('official-' + secrets.token_hex(3))}"},
        timeout=httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT),
    )
    async with (
        http,
        streamable_http_client(replicas.servers[1].url, http_client=http) as (read, write),
        ClientSession(read, write, read_timeout_seconds=DEADLINE, message_handler=on_message) as session,
    ):
        with anyio.fail_after(DEADLINE):
            await session.initialize()
            await session.subscribe_resource(WATCHED)
            while not updated.is_set():
                await legacy.call(0, "test_update_watched_resource")
                with anyio.move_on_after(0.2):
                    await updated.wait()
            await legacy.call(0, "test_trigger_tool_change")
            await legacy.call(0, "test_trigger_prompt_change")
            await prompts.wait()
    assert changed == [TOOLS_CHANGED, PROMPTS_CHANGED]


async def listen_for_tasks(
    http: httpx.AsyncClient, at: Replica, caller: str, task_ids: list[str], caps: dict[str, Any]
) -> httpx.Response:
    body = modern_body(LISTEN, {"notifications": {"taskIds": task_ids}}, meta(caps), 31)
    request = http.build_request("POST", at.url, json=body, headers=modern_headers(at.token(caller), LISTEN))
    return await http.send(request, stream=True)


async def test_a_task_on_one_replica_reports_its_status_to_its_owners_listen_stream_on_the_other(
    replicas: Replicas,
) -> None:
    """The task asks a question on A; the owner listens on B for it (and for a task that does not
    exist and another caller's, which are not agreed to), answers through B, and hears the task
    wait for input and complete, each as `tasks/get` would answer it."""
    first, second = Replica(replicas.servers[0], replicas), Replica(replicas.servers[1], replicas)
    owner, other = "task-owner-" + secrets.token_hex(3), "task-other-" + secrets.token_hex(3)
    task_id = call(first, "confirm_delete", {"filename": "a.txt"}, owner)["taskId"]
    foreign = call(first, "slow_compute", {"seconds": 0}, other)["taskId"]
    async with httpx.AsyncClient(timeout=DEADLINE) as http:
        response = await listen_for_tasks(http, second, owner, [task_id, "no-such-task", foreign], WITH_TASKS)
        try:
            stream = ListenStream(response)
            ack = await stream.next()
            assert ack["params"]["notifications"] == {"taskIds": [task_id]}
            heard = [await stream.next()]
            while heard[-1]["params"]["status"] != "input_required":
                heard.append(await stream.next())
            answer = {"confirm_delete": {"action": "accept", "content": {"confirm": True}}}
            updated = await anyio.to_thread.run_sync(
                lambda: post(second, "tasks/update", {"taskId": task_id, "inputResponses": answer}, caller=owner)
            )
            assert result_of(updated)["resultType"] == "complete"
            while heard[-1]["params"]["status"] != "completed":
                heard.append(await stream.next())
        finally:
            await response.aclose()
    assert {message["method"] for message in heard} == {"notifications/tasks"}
    assert {message["params"]["taskId"] for message in heard} == {task_id}
    assert all(message["params"]["_meta"] == {SUBSCRIPTION_ID: 31} for message in heard)
    waiting = next(message["params"] for message in heard if message["params"]["status"] == "input_required")
    assert set(waiting["inputRequests"]) == {"confirm_delete"}
    assert heard[-1]["params"]["result"]["content"][0]["text"] == "Deleted a.txt"


async def test_task_ids_without_the_tasks_extension_are_refused_with_32021(replicas: Replicas) -> None:
    at = Replica(replicas.servers[1], replicas)
    async with httpx.AsyncClient(timeout=DEADLINE) as http:
        response = await listen_for_tasks(http, at, "no-extension", ["some-task"], {})
        try:
            await response.aread()
        finally:
            await response.aclose()
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == -32021
    assert error["data"]["requiredCapabilities"] == {"extensions": {"io.modelcontextprotocol/tasks": {}}}
    assert response.json()["id"] == 31


def test_a_followed_stream_ends_with_an_error_soon_after_its_replica_is_killed(database: str, tmp_path: Path) -> None:
    """The call runs on A (60 s of progress); the client resumes its stream on B, which follows it;
    A is SIGKILLed. B learns from the heartbeat table that A is gone and answers the request with
    -32006 `replica_gone` as the stream's last event, well before the follower's deadline (the
    tool timeout, 120 s here, plus 5 s)."""
    env = {"AQL_MCP_LIMITS__TOOL_TIMEOUT_SECONDS": "120"}
    # Each replica writes its heartbeat row before it serves; the module's replicas share the database.
    with start_replicas(tmp_path, database, count=2, env=env) as fresh:
        anyio.run(_follow_through_a_kill, fresh)


async def _follow_through_a_kill(replicas: Replicas) -> None:
    async with httpx.AsyncClient(timeout=DEADLINE) as http:
        caller = Legacy(replicas, http)
        await caller.open(0)
        slow = {"name": "test_slow", "arguments": {"steps": 600}, "_meta": {"progressToken": "p"}}
        seen = []
        async with http.stream(
            "POST", caller.url(0), json=rpc("tools/call", slow, message_id=7), headers=caller.headers
        ) as posted:
            events = aiter(iter_events(posted))
            with anyio.fail_after(DEADLINE):
                while len([event for event in seen if event.data]) < 2:
                    seen.append(await anext(events))
        resumed = {**caller.headers, "accept": "text/event-stream", "last-event-id": str(seen[-1].id)}
        async with http.stream("GET", caller.url(1), headers=resumed, timeout=None) as followed:
            events = aiter(iter_events(followed))
            with anyio.fail_after(DEADLINE):
                relayed = await anext(events)
                while not relayed.data:  # the retry hint that opens a resumed stream
                    relayed = await anext(events)
                assert "method" in relayed.message  # progress, relayed from A
            replicas.servers[0].process.kill()
            killed = time.monotonic()
            with anyio.fail_after(60):
                rest = [event.message async for event in events if event.data]
            ended = time.monotonic() - killed
    assert all("method" in message for message in rest[:-1])
    last = rest[-1]
    assert last["id"] == 7
    assert last["error"]["code"] == -32006
    assert last["error"]["data"]["reason"] == "replica_gone"
    # Three missed heartbeats (15 s) and a check (2 s) at most, with room for a slow machine.
    assert ended < 30, ended
