"""The SSE details an MCP client hides, read off the wire of a real server (MCP 2025-11-25 `basic/transports`).

Priming events, event ids that name their stream, replay with `Last-Event-ID`, one GET stream per
session, and when the server answers JSON instead of SSE. Every stream is read under a deadline.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import pytest

from tests.support.asgi import open_session, rpc
from tests.support.server import ServerProcess
from tests.support.sse import Event, iter_events

pytestmark = pytest.mark.anyio

DEADLINE = 5.0
PROGRESS_TOOL = "test_tool_with_progress"
WATCHED = "test://watched-resource"


async def read_all(response: httpx.Response) -> list[Event]:
    """Every event until the server ends the stream."""
    with anyio.fail_after(DEADLINE):
        return [event async for event in iter_events(response)]


async def next_message(events: AsyncIterator[Event]) -> Event:
    """The next event that carries a message, skipping priming events and bare `retry` hints."""
    with anyio.fail_after(DEADLINE):
        async for event in events:
            if event.data:
                return event
    raise AssertionError("the stream ended before a message")


def split_id(event_id: str | None) -> tuple[str, int]:
    """`<stream>-<n>` -> (stream, n)."""
    assert event_id, "the event has no id"
    stream, sep, seq = event_id.rpartition("-")
    assert sep, event_id
    assert stream, event_id
    assert seq.isdigit(), event_id
    return stream, int(seq)


def progress_call(message_id: int, token: str) -> dict[str, Any]:
    return rpc("tools/call", {"name": PROGRESS_TOOL, "arguments": {}, "_meta": {"progressToken": token}}, message_id)


def payloads(events: list[Event]) -> list[Event]:
    """The events that carry a JSON-RPC message (not priming events nor bare `retry` hints)."""
    return [event for event in events if event.data]


@pytest.fixture
async def http(server: ServerProcess) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.base, timeout=DEADLINE) as client:
        yield client


@pytest.fixture
async def session(http: httpx.AsyncClient, server: ServerProcess) -> dict[str, str]:
    return await open_session(http, server.token())


async def post_stream(http: httpx.AsyncClient, session: dict[str, str], message: dict[str, Any]) -> list[Event]:
    async with http.stream("POST", "/mcp", json=message, headers=session) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        return await read_all(response)


async def test_a_post_whose_handler_sends_progress_answers_with_a_primed_event_stream(
    http: httpx.AsyncClient, session: dict[str, str]
) -> None:
    """2025-11-25 transports, "Sending Messages to the Server" 6: a priming event (id, empty data) first.

    Then the handler's notifications, each with an id `<stream>-<n>` that counts up, and the response last.
    """
    async with http.stream("POST", "/mcp", json=progress_call(7, "p7"), headers=session) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        assert response.headers["x-accel-buffering"] == "no"
        events = await read_all(response)

    priming, *rest = events
    assert priming.id is not None
    assert priming.data == ""
    assert priming.retry is not None
    assert priming.retry > 0
    assert all(event.data for event in rest)
    ids = [split_id(event.id) for event in events]
    assert len({stream for stream, _ in ids}) == 1
    seqs = [seq for _, seq in ids]
    assert seqs == sorted(set(seqs))
    messages = [event.message for event in rest]
    assert [m.get("method") for m in messages] == ["notifications/progress"] * 3 + [None]
    assert [m["params"]["progress"] for m in messages[:3]] == [0, 50, 100]
    assert {m["params"]["progressToken"] for m in messages[:3]} == {"p7"}
    assert messages[-1]["id"] == 7
    assert "result" in messages[-1]


async def test_a_request_whose_handler_sends_nothing_is_answered_with_json(
    http: httpx.AsyncClient, session: dict[str, str]
) -> None:
    response = await http.post("/mcp", json=rpc("tools/list", {}, 3), headers=session)

    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert body["id"] == 3
    assert isinstance(body["result"]["tools"], list)


async def test_resuming_a_stream_replays_exactly_its_later_events_and_none_of_another_stream(
    http: httpx.AsyncClient, session: dict[str, str]
) -> None:
    """2025-11-25 transports, "Resumability and Redelivery" 2: MUST NOT replay another stream's messages."""
    first = payloads(await post_stream(http, session, progress_call(1, "first")))
    second = payloads(await post_stream(http, session, progress_call(2, "second")))
    assert split_id(first[0].id)[0] != split_id(second[0].id)[0]

    headers = {**session, "last-event-id": str(first[0].id)}
    async with http.stream("GET", "/mcp", headers=headers) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        replayed = payloads(await read_all(response))

    assert [(event.id, event.data) for event in replayed] == [(event.id, event.data) for event in first[1:]]
    assert replayed[-1].message["id"] == 1


async def test_a_client_that_drops_a_post_stream_gets_the_rest_of_it_with_get_and_last_event_id(
    http: httpx.AsyncClient, session: dict[str, str]
) -> None:
    """2025-11-25 transports, "Sending Messages to the Server" 6: disconnection is not cancellation."""
    async with http.stream("POST", "/mcp", json=progress_call(4, "drop"), headers=session) as response:
        with anyio.fail_after(DEADLINE):
            events = aiter(iter_events(response))
            await anext(events)  # priming
            last = await anext(events)
    assert last.message["params"]["progress"] == 0

    async with http.stream("GET", "/mcp", headers={**session, "last-event-id": str(last.id)}) as response:
        assert response.status_code == 200
        rest = payloads(await read_all(response))

    assert [event.message["params"]["progress"] for event in rest[:-1]] == [50, 100]
    assert rest[-1].message["id"] == 4
    assert "result" in rest[-1].message
    assert [split_id(event.id)[1] for event in rest] == [split_id(last.id)[1] + n for n in (1, 2, 3)]


async def test_a_get_stream_resumed_with_last_event_id_replays_the_notification_it_missed(
    http: httpx.AsyncClient, session: dict[str, str]
) -> None:
    """2025-11-25 transports, "Resumability and Redelivery" 2: resumption applies to GET streams too."""
    subscribed = await http.post("/mcp", json=rpc("resources/subscribe", {"uri": WATCHED}, 1), headers=session)
    assert subscribed.status_code == 200
    async with http.stream("GET", "/mcp", headers=session) as stream:
        with anyio.fail_after(DEADLINE):
            priming = await anext(aiter(iter_events(stream)))
    assert priming.data == ""

    update = rpc("tools/call", {"name": "test_update_watched_resource", "arguments": {}}, 2)
    assert (await http.post("/mcp", json=update, headers=session)).status_code == 200
    async with http.stream("GET", "/mcp", headers={**session, "last-event-id": str(priming.id)}) as resumed:
        assert resumed.status_code == 200
        missed = await next_message(iter_events(resumed))  # the GET stream stays open after the replay

    assert missed.message["method"] == "notifications/resources/updated"
    assert missed.message["params"]["uri"] == WATCHED
    assert split_id(missed.id)[0] == split_id(priming.id)[0]


async def test_an_event_id_of_another_session_replays_nothing(
    http: httpx.AsyncClient, session: dict[str, str], server: ServerProcess
) -> None:
    """2025-11-25 transports, "Resumability and Redelivery": event ids are scoped to their session."""
    other = await open_session(http, server.token())
    theirs = payloads(await post_stream(http, other, progress_call(1, "theirs")))

    async with http.stream("GET", "/mcp", headers={**session, "last-event-id": str(theirs[0].id)}) as response:
        replayed = payloads(await read_all(response)) if response.status_code == 200 else []

    assert response.status_code in (200, 404, 410)
    assert replayed == []


@pytest.mark.parametrize("value", [b"no sequence here", b"g-\xb2", b"g-9223372036854775808", b"g-" + b"9" * 40])
async def test_a_malformed_last_event_id_is_refused_with_400(
    http: httpx.AsyncClient, session: dict[str, str], value: bytes
) -> None:
    """A superscript digit (`str.isdigit` takes it, `int` does not) and a sequence beyond 64 bits
    were answered 500 (issue 12); every malformed id is a 400."""
    response = await http.get("/mcp", headers={**session, "last-event-id": value})

    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32600


async def test_a_second_get_stream_of_a_session_is_refused_with_409(
    http: httpx.AsyncClient, session: dict[str, str]
) -> None:
    async with http.stream("GET", "/mcp", headers=session) as first:
        assert first.status_code == 200
        with anyio.fail_after(DEADLINE):
            await anext(aiter(iter_events(first)))  # the stream is attached once its first event is out

        second = await http.get("/mcp", headers=session)

    assert second.status_code == 409
    assert second.json()["error"]["code"] == -32007


async def test_a_cancelled_request_ends_its_stream_without_a_response(
    http: httpx.AsyncClient, session: dict[str, str]
) -> None:
    """MCP 2025-11-25 `basic/utilities/cancellation`: the receiver SHOULD NOT send a response; corporate §8.5."""
    async with http.stream("POST", "/mcp", json=progress_call(9, "cancel"), headers=session) as response:
        with anyio.fail_after(DEADLINE):
            events = aiter(iter_events(response))
            await anext(events)  # priming
            await anext(events)  # progress 0: the handler is running
            cancel = rpc("notifications/cancelled", {"requestId": 9, "reason": "test"}, message_id=None)
            accepted = await http.post("/mcp", json=cancel, headers=session)
            rest = payloads([event async for event in events])

    assert accepted.status_code == 202
    assert all("method" in event.message for event in rest)


async def test_a_2025_03_26_session_gets_no_priming_event_on_a_post_stream(
    http: httpx.AsyncClient, server: ServerProcess
) -> None:
    """Empty-data events came with 2025-11-25; an older client may try to parse one as JSON."""
    session = await open_session(http, server.token(), version="2025-03-26")

    events = await post_stream(http, session, progress_call(5, "old"))

    assert events == payloads(events)
    assert events[-1].message["id"] == 5


async def test_a_2025_03_26_session_gets_no_priming_event_on_its_get_stream(
    http: httpx.AsyncClient, server: ServerProcess
) -> None:
    """The first event of a 2025-03-26 GET stream is a message; the subscribe round trip lets it attach."""
    session = await open_session(http, server.token(), version="2025-03-26")
    async with http.stream("GET", "/mcp", headers=session) as stream:
        assert stream.status_code == 200
        await http.post("/mcp", json=rpc("resources/subscribe", {"uri": WATCHED}, 1), headers=session)
        await http.post(
            "/mcp",
            json=rpc("tools/call", {"name": "test_update_watched_resource", "arguments": {}}, 2),
            headers=session,
        )
        with anyio.fail_after(DEADLINE):
            first = await anext(aiter(iter_events(stream)))

    assert first.data
    assert first.message["method"] == "notifications/resources/updated"


async def test_resuming_a_cancelled_stream_is_answered_gone_so_the_client_stops_polling(
    http: httpx.AsyncClient, session: dict[str, str]
) -> None:
    """A stream that will never send again answers 410, not an empty 200 a client would poll forever."""
    async with http.stream("POST", "/mcp", json=progress_call(11, "gone"), headers=session) as response:
        with anyio.fail_after(DEADLINE):
            events = aiter(iter_events(response))
            await anext(events)  # priming
            progress = await anext(events)
            cancel = rpc("notifications/cancelled", {"requestId": 11}, message_id=None)
            await http.post("/mcp", json=cancel, headers=session)
            [event async for event in events]

    resumed = await http.get("/mcp", headers={**session, "last-event-id": str(progress.id)})
    assert resumed.status_code == 410
    assert resumed.json()["error"]["code"] == -32600


async def test_a_request_cancelled_before_its_answer_started_ends_with_an_empty_event_stream(
    http: httpx.AsyncClient, session: dict[str, str]
) -> None:
    """A request is answered with JSON or SSE, never 202 (transports, "Sending Messages" 5), and the
    cancelled one gets no response (cancellation): an event stream with no event."""
    quiet = rpc("logging/setLevel", {"level": "emergency"}, message_id=30)
    assert (await http.post("/mcp", json=quiet, headers=session)).status_code == 200
    call = rpc("tools/call", {"name": "test_tool_with_logging", "arguments": {}}, message_id=31)
    answer: list[httpx.Response] = []

    async def post() -> None:
        answer.append(await http.post("/mcp", json=call, headers=session))

    with anyio.fail_after(DEADLINE):
        async with anyio.create_task_group() as group:
            group.start_soon(post)
            # The handler runs ~150 ms; cancel until the POST returns (an unknown id is ignored).
            while not answer:
                await http.post(
                    "/mcp", json=rpc("notifications/cancelled", {"requestId": 31}, message_id=None), headers=session
                )
                await anyio.sleep(0.01)

    assert answer[0].status_code == 200
    assert answer[0].headers["content-type"].startswith("text/event-stream")
    assert answer[0].content.strip() == b""
