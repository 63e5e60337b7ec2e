"""SIGTERM while a call waits for the client's answer to elicitation or sampling (issue 12).

Before: a client that declared the capability and never answered held the replica's exit until
`shutdown.grace_seconds` ran out, and then the call was cut without an answer. Once the drain
window is over the replica accepts no new connection, so the answer (a new POST) can no longer
reach it: the call now ends at once in its SSE stream with JSON-RPC -32006 and `data.retryAfter`,
in an event that also carries the `retry` field, and the process exits. A call that does not wait
for the client keeps its grace period and completes.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from tests.support.asgi import CONFORMANCE, MCP_HEADERS, initialize_params, rpc
from tests.support.server import ServerProcess, start_server
from tests.support.sse import Event, iter_events

pytestmark = pytest.mark.anyio

SLOW = "tests.support.slow:plugin"
# Far beyond what these tests wait: an exit that needs the grace period fails the guard below.
GRACE_SECONDS = 300
GUARD_SECONDS = 60
RETRY_MS = 1500
SLOW_STEPS = 30  # 3 s: still running when the drain window (0.3 s) ends
WAITS = {
    "elicitation": ("test_elicitation", {"message": "Who are you?"}, "elicitation/create"),
    "sampling": ("test_sampling", {"prompt": "Say hi"}, "sampling/createMessage"),
}


async def open_session(http: httpx.AsyncClient, server: ServerProcess) -> dict[str, str]:
    """A client that declares elicitation and sampling, and will never answer either."""
    headers = {**MCP_HEADERS, "authorization": f"Bearer {server.token()}"}
    hello = rpc("initialize", initialize_params(capabilities={"elicitation": {}, "sampling": {}}))
    answer = await http.post("/mcp", json=hello, headers=headers)
    assert answer.status_code == 200, answer.text
    session = {**headers, "mcp-session-id": answer.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
    done = await http.post("/mcp", json=rpc("notifications/initialized", message_id=None), headers=session)
    assert done.status_code == 202
    return session


class Call:
    """One tools/call read off its SSE stream: `waiting` is set once it reached the awaited point."""

    def __init__(self, name: str, arguments: dict[str, Any], message_id: int) -> None:
        self.request = rpc("tools/call", {"name": name, "arguments": arguments}, message_id=message_id)
        self.waiting = anyio.Event()
        self.events: list[Event] = []

    async def run(self, http: httpx.AsyncClient, session: dict[str, str], reached: str) -> None:
        async with http.stream("POST", "/mcp", json=self.request, headers=session) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            async for event in iter_events(response):
                self.events.append(event)
                if event.data and json.loads(event.data).get("method") == reached:
                    self.waiting.set()

    @property
    def answer(self) -> Event:
        final = self.events[-1]
        assert final.data, self.events
        return final


async def stop_during(server: ServerProcess, *calls: tuple[Call, str]) -> int:
    """Start the calls, SIGTERM the replica once each is where it should be, read them to the end."""
    async with httpx.AsyncClient(base_url=server.base, timeout=GUARD_SECONDS) as http:
        session = await open_session(http, server)
        with anyio.fail_after(GUARD_SECONDS):
            async with anyio.create_task_group() as group:
                for call, reached in calls:
                    group.start_soon(call.run, http, session, reached)
                for call, _ in calls:
                    await call.waiting.wait()
                server.process.send_signal(signal.SIGTERM)
    return await anyio.to_thread.run_sync(lambda: server.process.wait(timeout=GUARD_SECONDS))


@pytest.mark.parametrize("kind", WAITS)
async def test_sigterm_ends_a_call_waiting_for_the_client_with_a_retry_hint_and_lets_others_finish(
    tmp_path: Path, kind: str
) -> None:
    name, arguments, method = WAITS[kind]
    env = {
        "AQL_MCP_SHUTDOWN__DRAIN_SECONDS": "0.3",
        "AQL_MCP_SHUTDOWN__GRACE_SECONDS": str(GRACE_SECONDS),
        "AQL_MCP_STREAMS__RETRY_MS": str(RETRY_MS),
        # Nor may the tool timeout end the wait: only the shutdown should.
        "AQL_MCP_LIMITS__TOOL_TIMEOUT_SECONDS": str(GRACE_SECONDS),
    }
    waiting = Call(name, arguments, message_id=7)
    working = Call("test_slow", {"steps": SLOW_STEPS}, message_id=8)
    working.request["params"]["_meta"] = {"progressToken": "p"}

    with start_server(tmp_path, env=env, plugins=(CONFORMANCE, SLOW)) as server:
        code = await stop_during(server, (waiting, method), (working, "notifications/progress"))
        log = server.log_text()

    assert code == 0
    # Every event is whole: the stream was not cut in the middle of one.
    assert all(json.loads(event.data) for event in waiting.events if event.data)
    answer = waiting.answer.message
    assert answer["id"] == 7
    assert answer["error"]["code"] == -32006
    assert answer["error"]["data"]["retryAfter"] == 2
    assert "result" not in answer
    assert waiting.answer.retry == RETRY_MS
    assert working.answer.message["result"]["content"][0]["text"] == "done"
    assert "Traceback" not in log
