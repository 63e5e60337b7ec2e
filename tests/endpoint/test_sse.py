"""src/aql_mcp/endpoint/sse.py: the one place the MCP streams' SSE frames are written (HTML Living Standard,
"Server-sent events", event stream interpretation), and the open response held by its request's own task."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import orjson
import pytest

from aql_mcp.endpoint.sse import HEADERS, KEEPALIVE, Connection, format_event, format_retry
from tests.support.wait import turn

SRC = Path(__file__).resolve().parents[2] / "src" / "aql_mcp"


def parse(frame: bytes) -> list[tuple[str, str]]:
    """The fields of one frame, as a client reads them (comments skipped); it must end with a blank line."""
    assert frame.endswith(b"\n\n"), frame
    lines = frame[:-2].decode("utf-8").split("\n")
    return [tuple(line.split(": ", 1)) for line in lines if not line.startswith(":")]  # type: ignore[misc]


def test_an_event_carries_its_id_then_retry_then_one_data_line() -> None:
    frame = format_event("p1-3", b'{"jsonrpc":"2.0"}', 2500)
    assert parse(frame) == [("id", "p1-3"), ("retry", "2500"), ("data", '{"jsonrpc":"2.0"}')]


def test_an_event_without_id_or_retry_is_its_data_alone() -> None:
    assert parse(format_event(None, b"{}")) == [("data", "{}")]


def test_a_priming_event_has_an_id_and_empty_data() -> None:
    """2025-11-25 Streamable HTTP, "Sending Messages" 6: an id and empty data the client can resume from."""
    assert parse(format_event("g-0", b"", 1000)) == [("id", "g-0"), ("retry", "1000"), ("data", "")]


def test_a_json_message_with_newlines_in_its_strings_stays_one_data_line() -> None:
    data = orjson.dumps({"text": "two\nlines\r\n"})
    assert parse(format_event(None, data)) == [("data", data.decode())]


def test_a_retry_hint_is_no_event_and_may_follow_a_comment() -> None:
    assert parse(format_retry(3000)) == [("retry", "3000")]
    frame = format_retry(3000, comment="shutting down")
    assert frame.startswith(b": shutting down\n")
    assert parse(frame) == [("retry", "3000")]


def test_keepalive_is_a_comment_a_client_ignores() -> None:
    assert KEEPALIVE.startswith(b":")
    assert parse(KEEPALIVE) == []


def test_headers_declare_an_unbuffered_event_stream() -> None:
    headers = dict(HEADERS)
    assert headers[b"content-type"] == b"text/event-stream"
    assert headers[b"x-accel-buffering"] == b"no"
    assert b"no-transform" in headers[b"cache-control"]


def test_no_other_module_frames_sse_by_hand() -> None:
    """The framing is one function: a field written as bytes anywhere else is a second copy."""
    field = re.compile(rb'b"(?::[^"]*\\n)?(?:id|data|retry|event): ')
    copies = [
        path.relative_to(SRC).as_posix()
        for path in SRC.rglob("*.py")
        if path.name != "sse.py" and field.search(path.read_bytes())
    ]
    assert copies == []


class Client:
    """The ASGI side of one SSE response: what the app sent, and a disconnect the test decides."""

    def __init__(self) -> None:
        self.sent: list[dict[str, object]] = []
        self.gone = asyncio.Event()

    async def send(self, message: dict[str, object]) -> None:
        self.sent.append(message)

    async def receive(self) -> dict[str, object]:
        await self.gone.wait()
        return {"type": "http.disconnect"}


async def holding(connection: Connection, client: Client) -> asyncio.Task[bool]:
    task = asyncio.ensure_future(connection.hold(client.receive))
    await turn(3)
    assert not task.done()
    return task


@pytest.mark.anyio
async def test_a_held_connection_returns_false_when_the_client_goes_away() -> None:
    client = Client()
    task = await holding(Connection(client.send), client)
    client.gone.set()
    assert await asyncio.wait_for(task, 1) is False


@pytest.mark.anyio
async def test_a_wake_ends_the_hold_and_leaves_the_task_uncancelled() -> None:
    """The request's own task waits for the disconnect; a wake-up is a cancellation it takes back."""
    client = Client()
    connection = Connection(client.send)

    async def hold_then_sleep() -> bool:
        woken = await connection.hold(client.receive)
        await turn()  # would raise if the wake-up were still pending
        task = asyncio.current_task()
        assert task is not None
        assert task.cancelling() == 0
        return woken

    task = asyncio.ensure_future(hold_then_sleep())
    await turn(3)
    connection.wake()
    connection.wake()  # a second wake before the first is taken is the same wake-up
    assert await asyncio.wait_for(task, 1) is True


@pytest.mark.anyio
async def test_ending_the_stream_completes_the_response_and_wakes_its_holder() -> None:
    client = Client()
    connection = Connection(client.send, standing=True)
    task = await holding(connection, client)
    await connection.end()
    assert await asyncio.wait_for(task, 1) is True
    assert connection.ended.is_set()
    assert client.sent[-1] == {"type": "http.response.body", "body": b"", "more_body": False}
    assert await connection.hold(client.receive) is True  # an ended connection holds nothing


@pytest.mark.anyio
async def test_a_cancellation_from_outside_is_not_taken_for_a_wake() -> None:
    """The server stopping the task (or a deadline) cancels it too: that one goes through, even
    when a wake-up came at the same moment."""
    client = Client()
    connection = Connection(client.send)
    task = await holding(connection, client)
    connection.wake()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 1)
