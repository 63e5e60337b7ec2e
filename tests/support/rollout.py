"""A rolling restart under load, as the test of docs/connections.md "Rolling restarts" runs it.

`Tally` counts every call the clients make and every failure they see. `follow_readiness` plays the
Kubernetes endpoints controller: it polls each replica's `/ready` and keeps nginx's upstream list to
the ready ones. The load loops drive the official `mcp` client in both eras through the gateway; the
listeners hold a legacy GET stream (through the client) and a modern `subscriptions/listen` stream
(plain HTTP) and count the notifications that reach them, whichever replica holds the stream.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import anyio
import httpx
import httpx2
from mcp import Client, ClientSession, types
from mcp.client import IncomingMessage
from mcp.client.streamable_http import streamable_http_client

from tests.support.listen import META, listen_body
from tests.support.modern import MODERN, modern_body, modern_headers
from tests.support.nginx import Gateway
from tests.support.replicas import Replicas
from tests.support.sse import iter_events

DEADLINE = 20.0
WATCHED = "test://watched-resource"
COLLECTION = "rollout"
POLL_SECONDS = 0.05
# A slow call reports progress every 100 ms for this many steps: longer than the test's drain.
SLOW_STEPS = 15
UPDATED = "notifications/resources/updated"


@dataclass
class Tally:
    """Calls and failures as the clients count them; `running` turns False to stop the load."""

    calls: dict[str, int] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    running: bool = True

    def total(self) -> int:
        return sum(self.calls.values())

    async def call(self, kind: str, attempt: Callable[[], Awaitable[bool]], seconds: float | None = DEADLINE) -> None:
        """Make one call; it fails when it raises, outlasts `seconds` or `attempt` says its answer is
        an error."""
        self.calls[kind] = self.calls.get(kind, 0) + 1
        try:
            with anyio.fail_after(seconds):
                ok = await attempt()
        except Exception as error:  # every failure a client sees is counted, whatever it is
            self.failures.append(f"{kind}: {error!r}")
            return
        if not ok:
            self.failures.append(f"{kind}: answered with an error")


async def follow_readiness(replicas: Replicas, gateway: Gateway, tally: Tally, draining: set[int]) -> None:
    """The endpoints controller: nginx's upstreams are the replicas whose `/ready` says 200. The
    ports it saw answer 503 (alive, but draining) go into `draining`."""
    async with httpx.AsyncClient(timeout=1.0) as http:
        while tally.running:
            ready = []
            for server in replicas.servers:
                status = await _readiness(http, server.base)
                if status == 200:
                    ready.append(server.port)
                elif status == 503:
                    draining.add(server.port)
            if ready and ready != gateway.upstreams:
                await anyio.to_thread.run_sync(gateway.set_upstreams, ready)
            # The controller's period, not a wait for a condition: it watches until the test ends.
            await anyio.sleep(POLL_SECONDS)


async def _readiness(http: httpx.AsyncClient, base: str) -> int | None:
    """The status of `/ready`, None when the replica cannot be reached."""
    try:
        return (await http.get(f"{base}/ready")).status_code
    except httpx.TransportError:
        return None


def _http(replicas: Replicas, subject: str) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(
        headers={"authorization": f"Bearer {replicas.token(subject)}"},
        timeout=httpx2.Timeout(DEADLINE),
    )


def aql(operation: str, **params: Any) -> dict[str, Any]:
    return {"operation": operation, "params": params}


def _complete(result: types.CallToolResult) -> bool:
    if result.is_error:
        raise AssertionError(f"the call answered an error: {result.content}")
    return True


@asynccontextmanager
async def legacy_session(
    replicas: Replicas, gateway: Gateway, subject: str, on_message: Callable[[IncomingMessage], Awaitable[None]]
) -> AsyncIterator[ClientSession]:
    """The official client in the 2025-11-25 era through the gateway: an initialized session."""
    http = _http(replicas, subject)
    async with (
        http,
        streamable_http_client(gateway.url, http_client=http) as (read, write),
        ClientSession(read, write, read_timeout_seconds=DEADLINE, message_handler=on_message) as session,
    ):
        with anyio.fail_after(DEADLINE):
            await session.initialize()
        yield session


async def _ignore(message: IncomingMessage) -> None:
    return None


async def legacy_load(replicas: Replicas, gateway: Gateway, tally: Tally, *, slow: bool = False) -> None:
    """One legacy session writing, reading and listing until the tally stops (`slow`: making
    calls that take seconds, so some are in flight when a replica stops)."""
    async with legacy_session(replicas, gateway, "legacy-" + secrets.token_hex(3), _ignore) as session:
        if slow:
            await _slow_cycle(tally, "legacy", session.call_tool)
        else:
            await _cycle(tally, "legacy", session.call_tool, session.list_tools)


async def modern_load(replicas: Replicas, gateway: Gateway, tally: Tally, *, slow: bool = False) -> None:
    """One 2026-07-28 client (no session: each call stands alone) doing the same."""
    http = _http(replicas, "modern-" + secrets.token_hex(3))
    connection = streamable_http_client(gateway.url, http_client=http)
    async with http, Client(connection, mode=MODERN) as client:
        if slow:
            await _slow_cycle(tally, "modern", client.call_tool)
        else:
            await _cycle(tally, "modern", client.call_tool, client.list_tools)


async def _slow_cycle(tally: Tally, era: str, call_tool: Any) -> None:
    async def slow() -> bool:
        result = await call_tool("test_slow", {"steps": SLOW_STEPS})
        return _complete(result) and result.content[0].text == "done"

    while tally.running:
        await tally.call(f"{era} slow", slow)


async def _cycle(tally: Tally, era: str, call_tool: Any, list_tools: Any) -> None:
    # Each caller has data of its own (its subject is its tenant): a collection for it first.
    _complete(await call_tool("mcp_aql_create", aql("create_collection", collection=COLLECTION)))
    created: list[str] = []

    async def write() -> bool:
        result = await call_tool("mcp_aql_create", aql("create_record", collection=COLLECTION, data={"era": era}))
        if not result.is_error:
            created.append(result.structured_content["data"]["id"])
        return _complete(result)

    async def read() -> bool:
        result = await call_tool("mcp_aql_read", aql("get_record", collection=COLLECTION, id=created[-1]))
        return _complete(result) and result.structured_content["data"]["era"] == era

    async def listing() -> bool:
        return bool((await list_tools()).tools)

    while tally.running:
        await tally.call(f"{era} write", write)
        if created:
            await tally.call(f"{era} read", read)
        await tally.call(f"{era} tools/list", listing)


@dataclass
class Heard:
    """Notifications a listener received, and how many streams it opened for them."""

    notifications: int = 0
    streams: int = 0
    arrived: anyio.Event = field(default_factory=anyio.Event)

    def note(self) -> None:
        self.notifications += 1
        self.arrived.set()
        self.arrived = anyio.Event()

    async def after(self, before: int) -> bool:
        """True once more than `before` notifications arrived (bounded by the caller's deadline)."""
        while self.notifications <= before:
            await self.arrived.wait()
        return True


async def legacy_listener(replicas: Replicas, gateway: Gateway, tally: Tally, heard: Heard) -> None:
    """A legacy session subscribed to a resource: its GET stream must follow it through every
    restart (the client resumes with Last-Event-ID). Each update, made by another session, must
    reach it."""

    async def on_message(message: IncomingMessage) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            heard.note()

    async with (
        legacy_session(replicas, gateway, "watcher-" + secrets.token_hex(3), on_message) as watcher,
        legacy_session(replicas, gateway, "trigger-" + secrets.token_hex(3), _ignore) as trigger,
    ):
        await watcher.subscribe_resource(WATCHED)
        while tally.running:
            before = heard.notifications
            await tally.call("legacy update", lambda: _update(trigger))
            await tally.call("legacy notification", partial(heard.after, before))


async def _update(session: ClientSession) -> bool:
    return _complete(await session.call_tool("test_update_watched_resource", {}))


async def modern_listener(replicas: Replicas, gateway: Gateway, tally: Tally, heard: Heard) -> None:
    """A `subscriptions/listen` stream through the gateway, listened again each time the service ends
    it, and a stateless caller updating the resource. A modern stream has no replay: an update made
    while no stream is open is not owed to the listener, so one made across a stream's end is
    made again rather than counted lost."""
    token = replicas.token("listener-" + secrets.token_hex(3))
    http = httpx.AsyncClient(timeout=httpx.Timeout(DEADLINE, read=None))
    async with http, anyio.create_task_group() as group:
        group.start_soon(_listen, http, gateway.url, token, tally, heard)
        while tally.running:
            streams, before = heard.streams, heard.notifications
            await tally.call("modern update", partial(_modern_update, http, gateway.url, token))
            with anyio.move_on_after(DEADLINE):
                await heard.after(before)
            if heard.notifications <= before and heard.streams == streams:
                tally.failures.append("modern notification: not heard on an open listen stream")
        group.cancel_scope.cancel()


async def _listen(http: httpx.AsyncClient, url: str, token: str, tally: Tally, heard: Heard) -> None:
    while tally.running:
        # A stream lives until the service ends it (the test cancels the last one): no deadline.
        await tally.call("modern listen", lambda: _one_stream(http, url, token, heard), seconds=None)


async def _one_stream(http: httpx.AsyncClient, url: str, token: str, heard: Heard) -> bool:
    """One listen stream until the service ends it: True when it ended with the listen's response."""
    body = listen_body({"resourceSubscriptions": [WATCHED]}, message_id="listen")
    headers = modern_headers(token, "subscriptions/listen")
    async with http.stream("POST", url, json=body, headers=headers) as response:
        if response.status_code != 200:
            raise AssertionError(f"the listen was answered {response.status_code}: {(await response.aread())!r}")
        heard.streams += 1
        async for event in iter_events(response):
            message = event.message if event.data else {}
            if message.get("method") == UPDATED:
                heard.note()
            elif message.get("id") == "listen":
                return "result" in message
    return False


async def _modern_update(http: httpx.AsyncClient, url: str, token: str) -> bool:
    name = "test_update_watched_resource"
    body = modern_body("tools/call", {"name": name, "arguments": {}}, META, 1)
    response = await http.post(url, json=body, headers=modern_headers(token, "tools/call", name))
    if response.status_code != 200 or "error" in response.json():
        raise AssertionError(f"the update was answered {response.status_code}: {response.text}")
    return True
