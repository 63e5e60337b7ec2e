"""`LimitedHttpProtocol` in process: a real asyncio server on 127.0.0.1 running the protocol in
front of a tiny ASGI app, driven by raw sockets."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
import uvicorn
from uvicorn.server import ServerState

from aql_mcp.server.connection import protocol_for
from aql_mcp.server.connection_limits import MAX_QUEUED_REQUESTS, ConnectionLimits, message_bound
from aql_mcp.server.connection_table import ConnectionTable
from tests.support.wait import eventually

pytestmark = pytest.mark.anyio
LIMITS = dict(
    max_connections=4,
    max_header_bytes=2048,
    max_headers=20,
    header_timeout=5.0,
    body_timeout=5.0,
    max_message_bytes=65536,
)


async def echo_length(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Answers with the length of the body it read; `/hold` starts a stream it never ends (an SSE
    GET), `/big` answers 16 MiB."""
    if scope["path"] == "/hold":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"event\n\n", "more_body": True})
        while (await receive())["type"] != "http.disconnect":
            pass
        return
    if scope["path"] == "/big":
        big = b"x" * (16 << 20)
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"%d" % len(big))]})
        await send({"type": "http.response.body", "body": big})
        return
    size, more = 0, True
    while more:
        message = await receive()
        size += len(message.get("body", b""))
        more = message.get("more_body", False)
    body = str(size).encode()
    await send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-length", str(len(body)).encode())]}
    )
    await send({"type": "http.response.body", "body": body})


class Port:
    def __init__(self, port: int, refusals: list[str], table: ConnectionTable) -> None:
        self.port = port
        self.refusals = refusals
        self.table = table

    async def exchange(self, data: bytes, *, read: int = 1) -> list[bytes]:
        """Send `data`, read `read` responses' heads (or until the server closes)."""
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        writer.write(data)
        heads = []
        try:
            for _ in range(read):
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
                length = int(next(v for k, v in _headers(head) if k == b"content-length"))
                await reader.readexactly(length)
                heads.append(head.split(b"\r\n", 1)[0])
        except asyncio.IncompleteReadError:
            pass
        writer.close()
        return heads


def _headers(head: bytes) -> list[tuple[bytes, bytes]]:
    lines = head.split(b"\r\n")[1:]
    return [(k.strip().lower(), v.strip()) for k, _, v in (line.partition(b":") for line in lines if line)]


@pytest.fixture
async def port(request: pytest.FixtureRequest) -> AsyncIterator[Port]:
    refusals: list[str] = []
    # Most tests fill the cap and evict at once; `min_evictable` is set by those about the young.
    values: dict[str, Any] = {**LIMITS, "idle_timeout": 5.0, "min_evictable": 0.0, **getattr(request, "param", {})}
    limits = ConnectionLimits(**values, on_refusal=refusals.append)
    config = uvicorn.Config(echo_length, http=protocol_for(limits), log_config=None, lifespan="off")
    config.load()
    state = ServerState()
    protocol = config.http_protocol_class
    server = await asyncio.get_running_loop().create_server(
        lambda: protocol(config=config, server_state=state, app_state={}),  # type: ignore[call-arg]
        "127.0.0.1",
        0,
    )
    yield Port(server.sockets[0].getsockname()[1], refusals, protocol.table)
    server.close()


def request(*, headers: int = 0, value: bytes = b"v", body: bytes = b"") -> bytes:
    fields = b"".join(b"X-%03d: %s\r\n" % (i, value) for i in range(headers))
    return b"POST / HTTP/1.1\r\nContent-Length: %d\r\n%s\r\n%s" % (len(body), fields, body)


async def test_a_head_at_the_byte_limit_passes_and_one_byte_more_gets_431(port: Port) -> None:
    # request line "POST /" counts its target "/" (1), Content-Length: 0 counts 14 + 1 + 4.
    base = 1 + 14 + 1 + 4 + (5 + 4)
    value = b"v" * (2048 - base)
    assert await port.exchange(request(headers=1, value=value)) == [b"HTTP/1.1 200 OK"]
    too_large = await port.exchange(request(headers=1, value=value + b"v"))
    assert too_large == [b"HTTP/1.1 431 Request Header Fields Too Large"]
    assert port.refusals == ["headers"]


async def test_the_header_count_limit_counts_every_field(port: Port) -> None:
    assert await port.exchange(request(headers=19)) == [b"HTTP/1.1 200 OK"]
    assert await port.exchange(request(headers=20)) == [b"HTTP/1.1 431 Request Header Fields Too Large"]


async def test_an_unfinished_head_is_refused_once_over_the_limit(port: Port) -> None:
    heads = await port.exchange(b"GET / HTTP/1.1\r\nX-Long: " + b"a" * 4096)
    assert heads == [b"HTTP/1.1 431 Request Header Fields Too Large"]


async def test_pipelined_requests_with_large_bodies_are_not_mistaken_for_a_large_head(port: Port) -> None:
    body = b"b" * 8192
    heads = await port.exchange(request(body=body) * 3, read=3)
    assert heads == [b"HTTP/1.1 200 OK"] * 3
    assert port.refusals == []


async def test_at_the_cap_a_new_connection_takes_the_place_of_the_oldest_one_without_a_request(port: Port) -> None:
    held = [await asyncio.open_connection("127.0.0.1", port.port) for _ in range(4)]
    assert await port.exchange(request()) == [b"HTTP/1.1 200 OK"]
    assert port.refusals == ["evicted"]
    oldest_reader = held[0][0]
    assert await asyncio.wait_for(oldest_reader.read(), 10) == b""  # closed, nothing sent
    for _, writer in held:
        writer.close()


async def test_at_the_cap_with_a_request_in_flight_on_every_connection_a_new_one_gets_503(port: Port) -> None:
    held = [await asyncio.open_connection("127.0.0.1", port.port) for _ in range(4)]
    for held_reader, held_writer in held:
        held_writer.write(b"POST / HTTP/1.1\r\nContent-Length: 10\r\nExpect: 100-continue\r\n\r\n")
        # The app's first read sends `100 Continue`: the request is in flight, waiting for its body.
        continued = await asyncio.wait_for(held_reader.readuntil(b"\r\n\r\n"), 10)
        assert continued.startswith(b"HTTP/1.1 100 ")
    reader, writer = await asyncio.open_connection("127.0.0.1", port.port)
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    assert head.startswith(b"HTTP/1.1 503 ")
    assert port.refusals == ["connections"]
    for _, held_writer in held:
        held_writer.close()
    writer.close()


async def test_trailer_fields_that_never_end_are_refused_413_once_the_message_passes_its_bound(port: Port) -> None:
    head = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nX-Trailer: "
    heads = await port.exchange(head + b"a" * 70_000)
    assert [line[:13] for line in heads] == [b"HTTP/1.1 413 "]
    assert port.refusals == ["body"]


async def test_a_chunked_body_and_its_trailer_within_the_bound_are_served(port: Port) -> None:
    chunks = b"".join(b"400\r\n" + b"c" * 1024 + b"\r\n" for _ in range(30))
    message = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks + b"0\r\nX-Sum: 1\r\n\r\n"
    assert await port.exchange(message * 2, read=2) == [b"HTTP/1.1 200 OK"] * 2
    assert port.refusals == []


def test_a_request_may_take_twice_the_body_and_twice_the_head_on_the_wire() -> None:
    assert message_bound(max_body_bytes=1_048_576, max_header_bytes=32_768) == 2_162_688


@pytest.mark.parametrize("port", [{"header_timeout": 0.2}], indirect=True)
async def test_an_empty_line_during_a_stream_never_arms_the_head_deadline_rfc9112_2_2(port: Port) -> None:
    """RFC 9112 §2.2: empty lines before a request line are ignored; a stream in flight outlives
    the head deadline however many arrive."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port.port)
    writer.write(b"GET /hold HTTP/1.1\r\nHost: x\r\n\r\n")
    assert (await asyncio.wait_for(reader.readuntil(b"event\n\n\r\n"), 10)).startswith(b"HTTP/1.1 200 ")
    writer.write(b"\r\n\r\nGET / HT")  # empty lines, then the start of a next head
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(reader.read(1), 1.0)  # well past the head deadline: still open
    assert port.refusals == []
    writer.close()


async def test_a_pipelining_client_gets_a_bounded_number_of_answers_then_a_close(port: Port) -> None:
    """Thousands of heads in one read queue at most `MAX_QUEUED_REQUESTS` requests."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port.port)
    writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" * 5000)
    answers = (await asyncio.wait_for(reader.read(), 10)).count(b"HTTP/1.1 200 ")
    assert answers == 1 + MAX_QUEUED_REQUESTS
    assert port.refusals == ["pipeline"]
    writer.close()


@pytest.mark.parametrize("port", [{"body_timeout": 0.2}], indirect=True)
async def test_a_client_that_never_reads_its_answer_is_aborted_after_the_body_timeout(port: Port) -> None:
    """A request whose answer never drains would otherwise stay in flight, holding its slot and
    its buffer, for ever."""
    _reader, writer = await asyncio.open_connection("127.0.0.1", port.port, limit=1024)
    writer.write(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
    await eventually(lambda: "write_timeout" in port.refusals, "the stalled answer was not aborted")
    assert len(port.table) == 0
    writer.close()


@pytest.mark.parametrize("port", [{"min_evictable": 30.0}], indirect=True)
async def test_at_the_cap_served_connections_too_recently_active_to_evict_make_a_newcomer_get_503(port: Port) -> None:
    held = [await asyncio.open_connection("127.0.0.1", port.port) for _ in range(4)]
    for held_reader, held_writer in held:  # each served once, and kept alive
        held_writer.write(request())
        await asyncio.wait_for(held_reader.readuntil(b"\r\n\r\n0"), 10)
    reader, writer = await asyncio.open_connection("127.0.0.1", port.port)
    assert (await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)).startswith(b"HTTP/1.1 503 ")
    assert port.refusals == ["connections"]
    for _, held_writer in [*held, (reader, writer)]:
        held_writer.close()


@pytest.mark.parametrize("port", [{"min_evictable": 30.0}], indirect=True)
async def test_at_the_cap_a_newcomer_evicts_the_oldest_never_served_connection_however_young(port: Port) -> None:
    """Issue 27, N3: bare connects younger than the floor no longer fill the table against a probe."""
    held = [await asyncio.open_connection("127.0.0.1", port.port) for _ in range(4)]
    assert await port.exchange(request()) == [b"HTTP/1.1 200 OK"]
    assert port.refusals == ["evicted"]
    assert await asyncio.wait_for(held[0][0].read(), 10) == b""  # the oldest bare connect, closed
    for _, held_writer in held:
        held_writer.close()


async def test_an_evicted_connection_with_an_unread_answer_is_aborted_not_left_draining(port: Port) -> None:
    """A close would wait, with no deadline, for the client to read what is buffered; an abort frees
    the descriptor and the buffer now (the client never gets the rest of the answer)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port.port, limit=1024)
    writer.write(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
    await eventually(lambda: port.table.oldest_waiting() is not None, "the answer was not complete")
    others = [await asyncio.open_connection("127.0.0.1", port.port) for _ in range(3)]
    for other_reader, other_writer in others:  # answered after it: newer in the same standing
        other_writer.write(request())
        await asyncio.wait_for(other_reader.readuntil(b"\r\n\r\n0"), 10)
    assert await port.exchange(request()) == [b"HTTP/1.1 200 OK"]
    assert port.refusals == ["evicted"]
    received = 0
    with contextlib.suppress(ConnectionResetError):
        while chunk := await asyncio.wait_for(reader.read(1 << 20), 10):
            received += len(chunk)
    assert received < 16 << 20  # the rest of the answer was dropped with the connection
    for _, other_writer in [*others, (reader, writer)]:
        other_writer.close()


@pytest.mark.parametrize("port", [{"max_per_source": 2}], indirect=True)
async def test_a_source_at_its_connection_cap_gets_503_for_one_more_and_a_slot_once_one_closes(port: Port) -> None:
    held = [await asyncio.open_connection("127.0.0.1", port.port) for _ in range(2)]
    reader, writer = await asyncio.open_connection("127.0.0.1", port.port)
    refused = await asyncio.wait_for(reader.read(), 10)  # answered before anything is read, then closed
    assert refused.startswith(b"HTTP/1.1 503 ")
    assert b'"limit":"connections_per_source"' in refused
    assert port.refusals == ["connections_per_source"]  # not an eviction: the table has room
    writer.close()
    held[0][1].close()
    await eventually(lambda: len(port.table) == 1, "the closed connection stayed counted")
    assert await port.exchange(request()) == [b"HTTP/1.1 200 OK"]
    held[1][1].close()
