"""What a gateway sees of a draining replica (docs/connections.md, "Rolling restarts"; server/shutdown.py).

During the drain every answer says `Connection: close` and the connection closes after it, so a
gateway's pool of idle connections to the replica empties; a connection left idle through the drain
is closed when the drain ends, while one opened just before and not yet used gets its request
answered; and the replica stops accepting before it ends its streams, so a client that comes
straight back is refused (and a gateway tries another replica) instead of landing on the replica in
its last moments.
"""

from __future__ import annotations

import signal
import socket
from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path

import anyio
import httpx
import orjson
import pytest

from tests.support.asgi import CONFORMANCE, open_session
from tests.support.listen import META, listen_body
from tests.support.modern import modern_body, modern_headers
from tests.support.rawhttp import connect, is_closed_by_peer, read_response
from tests.support.replicas import SLOW
from tests.support.server import ServerProcess, start_server
from tests.support.sse import iter_events
from tests.support.wait import until

pytestmark = pytest.mark.anyio

HEALTH = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
# Long enough that the drain outlasts what a test does in it; the fixture's stop (a second SIGTERM)
# skips the rest of it.
LONG_DRAIN = {"AQL_MCP_SHUTDOWN__DRAIN_SECONDS": "60"}


def served_keeping_alive(server: ServerProcess) -> socket.socket:
    """A connection that was answered once and stays open, as a gateway pools it."""
    sock = connect(server.port)
    sock.sendall(HEALTH)
    answer = read_response(sock)
    assert answer.status == 200
    assert "connection" not in answer.headers
    return sock


def start_draining(server: ServerProcess) -> None:
    server.process.send_signal(signal.SIGTERM)
    until(lambda: httpx.get(f"{server.base}/ready").status_code == 503, "the replica did not start draining")


def test_a_draining_replica_answers_connection_close_and_closes_after_the_answer(tmp_path: Path) -> None:
    with start_server(tmp_path, env=LONG_DRAIN) as server:
        pooled = served_keeping_alive(server)
        start_draining(server)
        pooled.sendall(HEALTH)
        answer = read_response(pooled)
        closed = is_closed_by_peer(pooled)
        pooled.close()

    assert answer.status == 200  # still served: the gateway may not know yet
    assert answer.headers["connection"] == "close"
    assert closed


def test_an_answer_under_way_when_the_drain_starts_closes_its_connection_when_it_ends(tmp_path: Path) -> None:
    """A call whose answer began before SIGTERM (an SSE stream of progress) has sent its head without
    `Connection: close`; its connection still closes after it, or a gateway would pool it, idle,
    until the port closes."""
    # No idle timeout may close it instead.
    env = {**LONG_DRAIN, "AQL_MCP_HTTP__IDLE_TIMEOUT_SECONDS": "600"}
    with start_server(tmp_path, env=env, plugins=(CONFORMANCE, SLOW)) as server:
        sock = connect(server.port)
        sock.sendall(slow_call(server))
        head = read_until(sock, b"\r\n\r\n")
        start_draining(server)
        body = read_until(sock, b"\r\n0\r\n\r\n")  # the chunked body's end
        closed = is_closed_by_peer(sock)
        sock.close()

    assert head.startswith(b"HTTP/1.1 200")
    assert b"text/event-stream" in head
    assert b"connection: close" not in head.lower()
    assert b'"text":"done"' in body
    assert closed


def slow_call(server: ServerProcess) -> bytes:
    """A raw 2026-07-28 call of the slow tool asking for progress, answered as an SSE stream."""
    meta = {**META, "progressToken": "slow"}
    body = orjson.dumps(modern_body("tools/call", {"name": "test_slow", "arguments": {"steps": 10}}, meta, 1))
    headers = {**modern_headers(server.token(), "tools/call", "test_slow"), "content-type": "application/json"}
    lines = [f"{name}: {value}" for name, value in headers.items()]
    head = "\r\n".join(["POST /mcp HTTP/1.1", "host: 127.0.0.1", f"content-length: {len(body)}", *lines])
    return head.encode() + b"\r\n\r\n" + body


def read_until(sock: socket.socket, end: bytes) -> bytes:
    sock.settimeout(15)
    data = b""
    while end not in data:
        chunk = sock.recv(65536)
        assert chunk, f"closed before {end!r}: {data!r}"
        data += chunk
    return data


def test_a_connection_idle_through_the_drain_is_closed_when_it_ends(tmp_path: Path) -> None:
    env = {"AQL_MCP_SHUTDOWN__DRAIN_SECONDS": "1", "AQL_MCP_SHUTDOWN__GRACE_SECONDS": "10"}
    with start_server(tmp_path, env=env) as server:
        idle = served_keeping_alive(server)
        used = served_keeping_alive(server)
        start_draining(server)
        # A connection idle since before SIGTERM still serves in the drain (closing it would race
        # a request the gateway is writing onto it) ...
        used.sendall(HEALTH)
        answer = read_response(used)
        # ... and one left idle is closed once the replica stops accepting, without a byte.
        idle.settimeout(15)
        received = idle.recv(65536)
        code = server.process.wait(timeout=30)
        idle.close()
        used.close()

    assert answer.status == 200
    assert received == b""
    assert code == 0


def test_a_connection_opened_before_the_replica_stops_accepting_gets_its_request_answered(tmp_path: Path) -> None:
    """A gateway opens a connection to send a request: one accepted just before the port closed,
    whose request comes after, is answered (then closed), not cut with the request on its way."""
    env = {"AQL_MCP_SHUTDOWN__DRAIN_SECONDS": "0.2", "AQL_MCP_SHUTDOWN__GRACE_SECONDS": "10"}
    with start_server(tmp_path, env=env) as server:
        fresh = connect(server.port)
        server.process.send_signal(signal.SIGTERM)
        until(partial(refuses, server.port), "the replica did not stop accepting")
        fresh.sendall(HEALTH)
        answer = read_response(fresh)
        closed = is_closed_by_peer(fresh)
        code = server.process.wait(timeout=30)
        fresh.close()

    assert answer.status == 200
    assert answer.headers["connection"] == "close"
    assert closed
    assert code == 0


def refuses(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except ConnectionRefusedError:
        return True
    return False


async def test_a_client_whose_stream_ended_cannot_come_back_to_the_stopping_replica(tmp_path: Path) -> None:
    """The GET stream's retry hint and the listen response come only once the port is closed: a
    reconnection made the moment a stream ends is refused, so a gateway sends it elsewhere."""
    env = {"AQL_MCP_MCP__MODERN_ERA": "true", "AQL_MCP_SHUTDOWN__DRAIN_SECONDS": "0.2"}
    refused: dict[str, bool] = {}
    with start_server(tmp_path, env=env) as server:
        token = server.token()
        async with httpx.AsyncClient(base_url=server.base, timeout=10) as http:
            session = await open_session(http, token)
            get = http.stream("GET", "/mcp", headers={**session, "accept": "text/event-stream"})
            listen = http.stream(
                "POST",
                "/mcp",
                json=listen_body({"toolsListChanged": True}),
                headers=modern_headers(token, "subscriptions/listen"),
            )
            with anyio.fail_after(15):
                async with get as get_stream, listen as listen_stream:
                    events = iter_events(listen_stream)
                    first = await anext(events)  # the listen is acknowledged: it is open
                    server.process.send_signal(signal.SIGTERM)
                    async with anyio.create_task_group() as group:
                        group.start_soon(_read_then_reconnect, get_stream.aiter_bytes(), server.port, refused, "get")
                        group.start_soon(_read_then_reconnect, events, server.port, refused, "listen")
            code = await anyio.to_thread.run_sync(lambda: server.process.wait(timeout=15))

    assert first.message["method"] == "notifications/subscriptions/acknowledged"
    assert refused == {"get": True, "listen": True}
    assert code == 0


async def _read_then_reconnect(stream: AsyncIterator[object], port: int, refused: dict[str, bool], name: str) -> None:
    async for _ in stream:
        pass
    try:
        connection = await anyio.connect_tcp("127.0.0.1", port)
    except OSError:
        refused[name] = True
        return
    await connection.aclose()
    refused[name] = False
