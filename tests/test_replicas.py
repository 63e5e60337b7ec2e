"""Three `aql-mcp serve` replicas sharing one PostgreSQL, as they run behind the gateway (issue 11).

Every request may land on any replica: the official `mcp` client here sends each request to the
next one (no session affinity), and raw HTTP checks pick the replica on purpose. What one replica
does, the others must see: sessions, streams and their events, cancellations, the rate budget,
and nothing acknowledged may be lost when a replica is killed (docs/store.md).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
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
from tests.support.replicas import Replicas, RoundRobin, start_replicas, wait_for_replica_count
from tests.support.sse import Event, iter_events
from tests.support.wait import eventually, until

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning"),
]

DEADLINE = 10.0
WATCHED = "test://watched-resource"
# Each caller's budget: 60 requests at once, refilled at one every two seconds, over all replicas.
RATE = {"AQL_MCP_LIMITS__RATE_PER_SECOND": "0.5", "AQL_MCP_LIMITS__RATE_BURST": "60"}


@pytest.fixture(scope="module")
def replicas(database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Replicas]:
    with start_replicas(tmp_path_factory.mktemp("replicas"), database, env=RATE) as started:
        wait_for_replica_count(started, 3)
        yield started


@asynccontextmanager
async def round_robin_client(
    replicas: Replicas, subject: str, **callbacks: Any
) -> AsyncIterator[tuple[ClientSession, RoundRobin]]:
    """The official client, each of its requests sent to the next replica."""
    transport = RoundRobin(replicas.ports)
    http = httpx2.AsyncClient(
        transport=transport,
        headers={"authorization": f"Bearer {replicas.token(subject)}"},
        timeout=httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT),
    )
    url = replicas.servers[0].url
    async with (
        http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write, read_timeout_seconds=DEADLINE, **callbacks) as session,
    ):
        with anyio.fail_after(DEADLINE):
            await session.initialize()
        yield session, transport


class Raw:
    """Plain HTTP to a chosen replica, for what the client library hides (event ids, streams)."""

    def __init__(self, replicas: Replicas, subject: str) -> None:
        self.replicas = replicas
        self.headers = {**MCP_HEADERS, "authorization": f"Bearer {replicas.token(subject)}"}
        self.http = httpx.AsyncClient(timeout=DEADLINE)

    def url(self, replica: int) -> str:
        return self.replicas.servers[replica].url

    async def open_session(self, replica: int) -> None:
        initialize = rpc(
            "initialize",
            {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
        )
        answer = await self.http.post(self.url(replica), json=initialize, headers=self.headers)
        assert answer.status_code == 200, answer.text
        self.headers |= {"mcp-session-id": answer.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
        await self.post(replica, rpc("notifications/initialized", message_id=None))

    async def post(self, replica: int, message: dict[str, Any]) -> httpx.Response:
        return await self.http.post(self.url(replica), json=message, headers=self.headers)


@pytest.fixture
async def raw(replicas: Replicas) -> AsyncIterator[Raw]:
    client = Raw(replicas, "raw-" + secrets.token_hex(3))
    async with client.http:
        yield client


def slow_call(message_id: int, steps: int) -> dict[str, Any]:
    params = {"name": "test_slow", "arguments": {"steps": steps}, "_meta": {"progressToken": f"p{message_id}"}}
    return rpc("tools/call", params, message_id=message_id)


def seq_of(event: Event) -> int:
    assert event.id is not None
    return int(event.id.rpartition("-")[2])


async def test_a_session_created_on_one_replica_works_on_every_other(replicas: Replicas) -> None:
    async with round_robin_client(replicas, "roamer") as (session, transport):
        tools = await session.list_tools()
        called = await session.call_tool("test_simple_text", {})
        resource = await session.read_resource("test://static-text")
        await session.send_ping()
    posts = {port for method, port, _ in transport.sent if method == "POST"}
    assert "test_simple_text" in {tool.name for tool in tools.tools}
    assert called.is_error is False
    assert resource.contents
    assert posts == set(replicas.ports)


async def test_a_get_stream_on_one_replica_gets_a_notification_caused_on_another(replicas: Replicas) -> None:
    updated = anyio.Event()

    async def on_message(message: IncomingMessage) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            updated.set()

    async with round_robin_client(replicas, "watcher", message_handler=on_message) as (session, transport):
        with anyio.fail_after(DEADLINE):
            await session.subscribe_resource(WATCHED)
            await eventually(lambda: any(m == "GET" for m, _, _ in transport.sent), "no GET stream opened")
            streaming = next(port for method, port, _ in transport.sent if method == "GET")
            before = len(transport.sent)
            await session.call_tool("test_update_watched_resource", {})
            called = transport.sent[before][1]
            await updated.wait()
    assert called != streaming


async def test_resuming_on_a_third_replica_replays_every_missed_event_exactly_once(raw: Raw) -> None:
    """The call runs on replica 0; the client drops its stream and resumes on replica 2 while the call
    still runs: it gets every event after the last one it saw, once, in order, then the response."""
    await raw.open_session(0)
    seen: list[Event] = []
    async with raw.http.stream("POST", raw.url(0), json=slow_call(7, 25), headers=raw.headers) as response:
        events = aiter(iter_events(response))
        with anyio.fail_after(DEADLINE):
            while len([e for e in seen if e.data]) < 3:
                seen.append(await anext(events))
    last = seq_of(seen[-1])
    resumed: list[Event] = []
    headers = {**raw.headers, "accept": "text/event-stream", "last-event-id": str(seen[-1].id)}
    async with raw.http.stream("GET", raw.url(2), headers=headers) as response:
        assert response.status_code == 200
        with anyio.fail_after(DEADLINE):
            resumed = [event async for event in iter_events(response) if event.data]
    numbers = [seq_of(event) for event in resumed]
    assert numbers == list(range(last + 1, last + 1 + len(numbers)))
    assert resumed[-1].message["result"]["content"][0]["text"] == "done"
    progress = [e.message["params"]["progress"] for e in seen[1:] + resumed if e.data and "method" in e.message]
    assert progress == list(range(25))


async def test_a_cancellation_sent_to_one_replica_stops_the_call_on_another(raw: Raw, replicas: Replicas) -> None:
    await raw.open_session(1)
    async with raw.http.stream("POST", raw.url(1), json=slow_call(9, 100), headers=raw.headers) as response:
        events = aiter(iter_events(response))
        with anyio.fail_after(DEADLINE):
            while not (await anext(events)).data:
                pass
            cancel = rpc("notifications/cancelled", {"requestId": 9, "reason": "changed my mind"}, message_id=None)
            assert (await raw.post(0, cancel)).status_code == 202
            rest = [event async for event in events if event.data]
    assert all("method" in event.message for event in rest), "a cancelled call gets no response"
    assert len(rest) < 50
    until(lambda: "slow_tool_stopped" in replicas.servers[1].log_text(), "the call on replica 1 did not stop")


async def test_one_callers_rate_limit_holds_as_one_budget_across_replicas(replicas: Replicas) -> None:
    """docs/store.md: each of n replicas enforces ceil(burst / n) and rate / n; spread over all of
    them, a caller gets the configured burst of 60, plus at most n - 1 for rounding and the refill."""
    headers = {**MCP_HEADERS, "authorization": f"Bearer {replicas.token('greedy')}"}
    statuses: dict[int, list[int]] = {port: [] for port in replicas.ports}
    async with httpx.AsyncClient(timeout=DEADLINE) as http:
        for index in range(120):
            server = replicas.servers[index % 3]
            answer = await http.post(server.url, json=rpc("ping", message_id=index), headers=headers)
            statuses[server.port].append(answer.status_code)
    accepted = sum(codes.count(200) for codes in statuses.values())
    assert all(set(codes) == {200, 429} for codes in statuses.values()), statuses
    assert 60 <= accepted <= 64, accepted


async def test_a_session_deleted_on_one_replica_is_gone_on_every_other(raw: Raw) -> None:
    await raw.open_session(0)
    assert (await raw.post(1, rpc("ping", message_id=2))).status_code == 200
    assert (await raw.http.delete(raw.url(2), headers=raw.headers)).status_code == 204

    async def gone_everywhere() -> bool:
        answers = [await raw.post(replica, rpc("ping", message_id=3)) for replica in range(3)]
        return all(answer.status_code == 404 for answer in answers)

    with anyio.fail_after(DEADLINE):
        while not await gone_everywhere():  # noqa: ASYNC110 - another process's doing
            await anyio.sleep(0.05)


def test_killing_a_replica_mid_stream_loses_no_acknowledged_event_or_write(database: str, tmp_path: Path) -> None:
    """SIGKILL of the replica holding a GET stream: events it delivered and writes it acknowledged are
    all in the store, and the stream resumes on another replica with nothing missing or repeated."""
    with start_replicas(tmp_path, database) as fresh:
        anyio.run(_kill_mid_stream, fresh)


async def _kill_mid_stream(replicas: Replicas) -> None:
    raw = Raw(replicas, "survivor")
    async with raw.http:
        await raw.open_session(0)
        assert (await raw.post(0, rpc("resources/subscribe", {"uri": WATCHED}))).status_code == 200
        written = [await _create_record(raw, index) for index in range(6)]
        delivered: list[Event] = []
        get_headers = {**raw.headers, "accept": "text/event-stream"}
        async with raw.http.stream("GET", raw.url(1), headers=get_headers) as stream:
            events = aiter(iter_events(stream))
            with anyio.fail_after(DEADLINE):
                await anext(events)  # priming
                for _ in range(3):
                    await raw.post(0, rpc("tools/call", {"name": "test_update_watched_resource", "arguments": {}}))
                    delivered.append(await anext(events))
            replicas.servers[1].process.kill()
        for _ in range(2):
            await raw.post(2, rpc("tools/call", {"name": "test_update_watched_resource", "arguments": {}}))
        resumed_headers = {**get_headers, "last-event-id": "g-0"}
        async with raw.http.stream("GET", raw.url(2), headers=resumed_headers) as stream:
            replayed: list[Event] = []
            events = aiter(iter_events(stream))
            with anyio.fail_after(DEADLINE):
                while len(replayed) < 5:
                    event = await anext(events)
                    if event.data:
                        replayed.append(event)
        listed = await raw.post(2, _aql("list_records", collection="notes", first=50))
    assert [seq_of(e) for e in replayed] == [1, 2, 3, 4, 5]
    assert [e.data for e in replayed[:3]] == [e.data for e in delivered]
    items = json.loads(listed.json()["result"]["content"][0]["text"])["data"]["items"]
    assert {item["id"] for item in items} == set(written)


def _aql(operation: str, **params: Any) -> dict[str, Any]:
    family = "mcp_aql_create" if operation.startswith("create") else "mcp_aql_read"
    return rpc("tools/call", {"name": family, "arguments": {"operation": operation, "params": params}})


async def _create_record(raw: Raw, index: int) -> str:
    if index == 0:
        made = await raw.post(0, _aql("create_collection", collection="notes"))
        assert made.status_code == 200, made.text
    answer = await raw.post(index % 3, _aql("create_record", collection="notes", data={"n": index}))
    envelope = json.loads(answer.json()["result"]["content"][0]["text"])
    assert envelope["success"] is True, envelope
    return str(envelope["data"]["id"])
