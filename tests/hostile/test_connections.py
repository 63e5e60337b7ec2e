"""Attacks on connections, before any ASGI work (issue 12, "Availability and resources"): huge and
unfinished request heads, too many headers, trailer fields that never end, silent and trickling
connections, slow bodies, more connections than the replica can hold, connect floods, and the metrics
port.

Every refusal is a complete HTTP answer with a JSON-RPC error body (431 / -32005, 408 / -32004,
503 / -32006; corporate §13.2, §14) and `connection: close`; nothing internal in it.
"""

from __future__ import annotations

import os
import resource
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from tests.support.asgi import MCP_HEADERS, initialize_params, open_session, rpc
from tests.support.rawhttp import (
    RawResponse,
    connect,
    is_closed_by_peer,
    is_readable,
    open_descriptors,
    open_file_limits,
    read_response,
    rss_kib,
    send_until_answered,
    send_until_closed,
    slow_connections,
    trickle_until_answered,
)
from tests.support.server import ServerProcess, free_port, start_server
from tests.support.wait import until

MB = 1024 * 1024
# Short deadlines, so that nothing here waits long for them.
QUICK = {
    "AQL_MCP_HTTP__HEADER_TIMEOUT_SECONDS": "1",
    "AQL_MCP_HTTP__BODY_TIMEOUT_SECONDS": "1",
    "AQL_MCP_HTTP__IDLE_TIMEOUT_SECONDS": "1",
    "AQL_MCP_STREAMS__KEEPALIVE_SECONDS": "0.5",
}
SLOW_PLUGINS = ("aql_mcp.testing.conformance:plugin", "tests.support.slow:plugin")
LEAKS = (b"Traceback", b"/work", b"site-packages", b".py", b"httptools", b"uvicorn")


@pytest.fixture(scope="module")
def quick(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with start_server(tmp_path_factory.mktemp("quick"), env=QUICK, plugins=SLOW_PLUGINS) as process:
        yield process


@pytest.fixture
async def http(quick: ServerProcess) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=quick.base, timeout=30.0) as client:
        yield client


def assert_refusal(response: RawResponse, status: int, code: int) -> dict[str, Any]:
    """A complete refusal: the status, a JSON-RPC error with the code, the connection closing."""
    assert response.status == status, response
    assert response.headers["content-type"] == "application/json"
    assert response.headers["connection"] == "close"
    for leak in LEAKS:
        assert leak not in response.body, response.body
    message = response.json()
    assert message["jsonrpc"] == "2.0"
    assert message["id"] is None
    error: dict[str, Any] = message["error"]
    assert error["code"] == code
    assert error["data"]["requestId"] == response.headers["x-request-id"]
    return error


def mcp_post(port: int, token: str | None, length: int) -> bytes:
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    return (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{auth}Content-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\nContent-Length: {length}\r\n\r\n"
    ).encode("latin-1")


# Heads -----------------------------------------------------------------------------------------


def test_a_64_mb_header_gets_431_without_the_server_growing_by_it(quick: ServerProcess) -> None:
    before = rss_kib(quick.process.pid)
    with connect(quick.port) as sock:
        sent = send_until_answered(sock, b"GET /health HTTP/1.1\r\nX-Big: ", b"a" * 65536, 64 * MB)
        error = assert_refusal(read_response(sock), 431, -32005)
    assert error["data"]["limit"] == "request_headers"
    assert sent < 64 * MB, "the server read the whole header before refusing it"
    assert rss_kib(quick.process.pid) - before < 16 * 1024


def test_a_head_with_too_many_headers_gets_431(quick: ServerProcess) -> None:
    head = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n" + b"".join(b"X-%d: y\r\n" % i for i in range(150))
    with connect(quick.port) as sock:
        sock.sendall(head + b"\r\n")
        error = assert_refusal(read_response(sock), 431, -32005)
        assert error["data"]["maxHeaders"] == 100
        assert is_closed_by_peer(sock)


def test_unfinished_multi_megabyte_heads_are_cut_with_431_and_memory_stays_bounded(quick: ServerProcess) -> None:
    before = rss_kib(quick.process.pid)
    socks = [connect(quick.port) for _ in range(8)]
    try:
        for sock in socks:
            # Many headers of 8 KiB each, never finished: 8 MB offered per connection.
            send_until_answered(sock, b"GET /health HTTP/1.1\r\n", b"X-Fill: " + b"f" * 8184 + b"\r\n", 8 * MB)
        for sock in socks:
            assert_refusal(read_response(sock), 431, -32005)
    finally:
        for sock in socks:
            sock.close()
    assert rss_kib(quick.process.pid) - before < 16 * 1024


def test_a_malformed_head_gets_a_json_rpc_400(quick: ServerProcess) -> None:
    with connect(quick.port) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nBad Header\x01: x\r\n\r\n")
        assert_refusal(read_response(sock), 400, -32600)


# Bodies after the head ------------------------------------------------------------------------

CHUNKED_HEAD = (
    "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{auth}Content-Type: application/json\r\n"
    "Accept: application/json, text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
)


def chunked_post(port: int, token: str | None) -> bytes:
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    return CHUNKED_HEAD.format(port=port, auth=auth).encode("latin-1")


def chunked(body: bytes, size: int = 8192) -> bytes:
    parts = (body[i : i + size] for i in range(0, len(body), size))
    return b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in parts) + b"0\r\n"


def initialize_body(padding: int = 0) -> bytes:
    # Whitespace after the value is valid JSON: a body of any size the server must still read.
    return orjson.dumps(rpc("initialize", initialize_params())) + b" " * padding


def test_trailer_fields_that_never_end_are_cut_without_a_token_and_memory_stays_bounded(tmp_path: Path) -> None:
    """The answer (401) comes at once; the trailer that follows the last chunk is counted with the rest
    of the message and the connection closed past 2 x max_body + 2 x max_header, long before the
    (default, 30 s) body deadline. Memory stays bounded with four such connections."""
    with start_server(tmp_path) as server:
        before = rss_kib(server.process.pid)
        socks = [connect(server.port) for _ in range(4)]
        try:
            for sock in socks:
                sock.sendall(chunked_post(server.port, None) + chunked(b"{}") + b"X-Trailer: ")
            sent = [send_until_closed(sock, b"a" * 65536, 64 * MB) for sock in socks]
        finally:
            for sock in socks:
                sock.close()
        assert max(sent) < 16 * MB, "the server kept reading an endless trailer"
        assert rss_kib(server.process.pid) - before < 16 * 1024
        assert _health(server) == 200


def test_trailer_fields_that_never_end_after_a_valid_body_get_413(quick: ServerProcess) -> None:
    with connect(quick.port) as sock:
        sock.sendall(chunked_post(quick.port, quick.token()) + chunked(initialize_body()) + b"X-Trailer: ")
        sent = send_until_answered(sock, b"", b"a" * 65536, 64 * MB)
        error = assert_refusal(read_response(sock), 413, -32005)
        assert error["data"]["limit"] == "request_body"
        assert is_closed_by_peer(sock)
    assert sent < 16 * MB


def test_a_1_mib_chunked_body_with_a_trailer_is_served_and_pipelined_requests_still_work(quick: ServerProcess) -> None:
    token = quick.token()
    body = initialize_body(padding=1_048_576 - len(initialize_body()))
    assert len(body) == 1_048_576  # http.max_body_bytes
    with connect(quick.port) as sock:
        sock.sendall(chunked_post(quick.port, token) + chunked(body) + b"X-Checksum: 1\r\n\r\n")
        assert read_response(sock).status == 200
    small = mcp_post(quick.port, token, len(initialize_body())) + initialize_body()
    with connect(quick.port) as sock:
        sock.sendall(small * 3)
        assert [read_response(sock).status for _ in range(3)] == [200] * 3


# Deadlines -------------------------------------------------------------------------------------


def test_a_connection_that_sends_nothing_is_closed_after_the_idle_timeout(quick: ServerProcess) -> None:
    with connect(quick.port) as sock:
        assert is_closed_by_peer(sock)


def test_a_trickled_head_gets_408_and_is_closed_after_the_header_timeout(quick: ServerProcess) -> None:
    with connect(quick.port) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        assert trickle_until_answered(sock, b"a", every=0.1, seconds=10.0)
        error = assert_refusal(read_response(sock), 408, -32004)
        assert error["data"]["limit"] == "request_headers"
        assert is_closed_by_peer(sock)


def test_line_breaks_before_a_request_do_not_keep_a_connection_open(quick: ServerProcess) -> None:
    with connect(quick.port) as sock:
        assert trickle_until_answered(sock, b"\r\n", every=0.1, seconds=10.0)
        assert is_closed_by_peer(sock)


def test_a_body_slower_than_the_body_timeout_gets_408_and_the_connection_closes(quick: ServerProcess) -> None:
    with connect(quick.port) as sock:
        sock.sendall(mcp_post(quick.port, quick.token(), 1000) + b'{"jsonrpc":"2.0",')
        assert trickle_until_answered(sock, b" ", every=0.1, seconds=10.0)
        error = assert_refusal(read_response(sock), 408, -32004)
        assert error["data"]["limit"] == "request_body"
        assert is_closed_by_peer(sock)


def test_a_client_trickling_a_body_after_an_early_answer_is_closed(quick: ServerProcess) -> None:
    with connect(quick.port) as sock:
        sock.sendall(mcp_post(quick.port, None, 100_000) + b"{")
        assert read_response(sock).status == 401
        assert trickle_until_answered(sock, b" ", every=0.1, seconds=10.0)
        assert is_closed_by_peer(sock)


def test_keep_alive_reuse_still_works(quick: ServerProcess) -> None:
    with connect(quick.port) as sock:
        for _ in range(3):
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            assert read_response(sock).status == 200


@pytest.mark.anyio
async def test_a_tool_call_longer_than_every_deadline_is_not_cut(http: httpx.AsyncClient, quick: ServerProcess) -> None:
    session = await open_session(http, quick.token())
    call = rpc("tools/call", {"name": "test_slow", "arguments": {"steps": 30}})  # 3 s, three idle timeouts
    response = await http.post("/mcp", json=call, headers=session)
    assert response.status_code == 200
    assert "error" not in response.json()


@pytest.mark.anyio
async def test_an_sse_stream_outlives_the_idle_and_header_timeouts(
    http: httpx.AsyncClient, quick: ServerProcess
) -> None:
    session = await open_session(http, quick.token())
    headers = {**session, "accept": "text/event-stream"}
    async with http.stream("GET", "/mcp", headers=headers) as stream:
        assert stream.status_code == 200
        keepalives = 0
        async for line in stream.aiter_lines():
            keepalives += line.startswith(":")
            if keepalives >= 6:  # three seconds of 0.5 s keep-alive comments: three idle timeouts
                break
    assert keepalives >= 6


# The connection cap ----------------------------------------------------------------------------


# A small cap and long head and body deadlines: what holds a slot holds it for the whole test.
CROWDED = {
    "AQL_MCP_HTTP__MAX_CONNECTIONS": "32",
    "AQL_MCP_HTTP__HEADER_TIMEOUT_SECONDS": "60",
    "AQL_MCP_HTTP__BODY_TIMEOUT_SECONDS": "60",
    "AQL_MCP_HTTP__IDLE_TIMEOUT_SECONDS": "60",
}
SLOTS = 32
LINGER_BUDGET = 32  # connection.LINGERING_REFUSALS


@contextmanager
def requests_in_flight(server: ServerProcess, count: int) -> Iterator[list[socket.socket]]:
    """`count` connections, each with an authenticated POST whose body never comes: the server has
    begun to read each body (its `100 Continue` says so), so each is a request in flight."""
    body_head = mcp_post(server.port, server.token(), 1000).replace(b"\r\n\r\n", b"\r\nExpect: 100-continue\r\n\r\n")
    socks: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = connect(server.port)
            socks.append(sock)
            sock.sendall(body_head)
            assert sock.recv(64).startswith(b"HTTP/1.1 100 "), "the request did not reach the app"
            sock.sendall(b"{")
        yield socks
    finally:
        for sock in socks:
            sock.close()


@pytest.mark.anyio
async def test_probes_and_a_ping_answer_on_the_service_port_while_unfinished_heads_fill_every_slot(
    tmp_path: Path,
) -> None:
    """Issue 12: /health and /ready must answer while an attack runs. At the cap, a new connection
    takes the place of the oldest one with no request in flight, once that one is a second old
    (docs/connections.md): a probe refused 503 before then gets in on a retry, as the kubelet's do."""
    with start_server(tmp_path, env=CROWDED) as server:
        for _ in range(2):  # the attacker refills the slots it lost: the probes still get in
            with slow_connections(server.port, SLOTS) as attackers:
                until(lambda: _health(server) == 200, "a probe never got in")
                async with httpx.AsyncClient(base_url=server.base, timeout=30.0) as http:
                    assert (await http.get("/health")).status_code == 200
                    assert (await http.get("/ready")).status_code == 200
                    session = await open_session(http, server.token())
                    pong = await http.post("/mcp", json=rpc("ping", message_id=3), headers=session)
                    assert pong.json() == {"jsonrpc": "2.0", "id": 3, "result": {}}
                until(lambda: any(map(is_readable, attackers)), "no unfinished head made room for the probes")


def test_with_a_request_in_flight_on_every_connection_a_new_connection_gets_a_clean_503(tmp_path: Path) -> None:
    env = {**CROWDED, "AQL_MCP_LIMITS__MAX_CONCURRENT_CALLS": "64"}
    with start_server(tmp_path, env=env) as server:
        with requests_in_flight(server, SLOTS), connect(server.port) as sock:
            response = read_response(sock)  # nothing sent: the refusal comes before any reading
            error = assert_refusal(response, 503, -32006)
            assert error["data"]["limit"] == "connections"
            assert response.headers["retry-after"] == str(error["data"]["retryAfter"])
        until(lambda: _health(server) == 200, "the service did not resume after the connections closed")
        assert "connection_limits" in server.log_text()


def test_a_connect_flood_at_a_full_server_holds_few_descriptors_beyond_the_cap(tmp_path: Path) -> None:
    """Refused connections linger (to be read, not reset) only up to a small budget; beyond it they
    close at once, so a flood cannot hold descriptors the cap does not count."""
    metrics_port = free_port()
    env = {**CROWDED, "AQL_MCP_LIMITS__MAX_CONCURRENT_CALLS": "64", "AQL_MCP_METRICS__PORT": str(metrics_port)}
    with start_server(tmp_path, env=env) as server:
        baseline = open_descriptors(server.process.pid)
        with requests_in_flight(server, SLOTS), ExitStack() as flood:
            for _ in range(400):
                flood.enter_context(connect(server.port))
            until(lambda: _refusals(metrics_port) >= 400, "the server did not refuse the flood")
            assert open_descriptors(server.process.pid) <= baseline + SLOTS + LINGER_BUDGET + 8


def _refusals(metrics_port: int) -> float:
    # Scraped on the metrics port: the service port is full.
    metrics = httpx.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10.0).text
    for line in metrics.splitlines():
        if line.startswith('aql_mcp_limit_events_total{kind="connections"}'):
            return float(line.split()[-1])
    return 0.0


def _health(server: ServerProcess) -> int:
    try:
        return httpx.get(f"{server.base}/health", timeout=5.0).status_code
    except httpx.TransportError:
        return 0


# Under attack ----------------------------------------------------------------------------------


@contextmanager
def low_file_limit(soft: int = 256) -> Iterator[None]:
    """Processes started inside begin with a soft limit on open files of `soft`, as on many hosts."""
    before, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (before, hard))


@pytest.mark.anyio
async def test_probes_and_a_ping_answer_while_300_slow_connections_are_held_by_a_server_started_with_256_files(
    tmp_path: Path,
) -> None:
    env = {"AQL_MCP_HTTP__HEADER_TIMEOUT_SECONDS": "120"}
    with ExitStack() as stack:
        with low_file_limit():
            server = stack.enter_context(start_server(tmp_path, env=env))
        stack.enter_context(slow_connections(server.port, 300))
        async with httpx.AsyncClient(base_url=server.base, timeout=30.0) as http:
            assert (await http.get("/health")).status_code == 200
            assert (await http.get("/ready")).status_code == 200
            session = await open_session(http, server.token())
            pong = await http.post("/mcp", json=rpc("ping", message_id=7), headers=session)
            assert pong.status_code == 200
            assert pong.json() == {"jsonrpc": "2.0", "id": 7, "result": {}}
        # Started with a soft limit of 256, the server raised it to the hard limit.
        soft, hard = open_file_limits(server.process.pid)
        assert soft == min(hard, 1_048_576) > 256


# The metrics port ------------------------------------------------------------------------------


def test_metrics_are_served_on_their_own_port_and_not_on_the_main_one(tmp_path: Path) -> None:
    port = free_port()
    with start_server(tmp_path, env={"AQL_MCP_METRICS__PORT": str(port)}) as server:
        scraped = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10.0)
        assert scraped.status_code == 200
        assert "aql_mcp_http_requests_total" in scraped.text
        assert httpx.get(f"{server.base}/metrics", timeout=10.0).status_code == 404
        # The same series as the main app: the probe the test server was started with is counted.
        assert 'route="/health"' in scraped.text
    assert server.process.returncode == 0, "both servers stop cleanly on SIGTERM"


def test_the_metrics_port_honours_the_allowed_clients(tmp_path: Path) -> None:
    port = free_port()
    env = {"AQL_MCP_METRICS__PORT": str(port), "AQL_MCP_METRICS__ALLOWED_CLIENTS": '["10.0.0.0/8"]'}
    with start_server(tmp_path, env=env):
        refused = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10.0)
        assert refused.status_code == 403
        assert refused.json()["error"]["code"] == -32600


def test_a_metrics_port_already_taken_is_a_configuration_error_at_start(tmp_path: Path) -> None:
    """Exit 2 naming the setting, before the service port serves anything; no traceback."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        env = {
            **os.environ,
            "AQL_MCP_STORE__PATH": str(tmp_path),
            "AQL_MCP_METRICS__PORT": str(taken.getsockname()[1]),
        }
        command = [sys.executable, "-m", "aql_mcp.main", "serve", "--dev", "--port", str(free_port())]
        done = subprocess.run(command, env=env, capture_output=True, timeout=60, check=False)
    output = (done.stdout + done.stderr).decode("utf-8", "replace")
    assert done.returncode == 2, output
    assert "metrics.port" in output
    assert "AQL_MCP_METRICS__PORT" in output
    assert "Traceback" not in output


def test_an_initialize_after_a_refusal_on_another_connection_still_works(quick: ServerProcess) -> None:
    with connect(quick.port) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\n" + b"X: y\r\n" * 200 + b"\r\n")
        assert_refusal(read_response(sock), 431, -32005)
    headers = {**MCP_HEADERS, "authorization": f"Bearer {quick.token()}"}
    body = orjson.dumps(rpc("initialize", initialize_params()))
    response = httpx.post(quick.url, content=body, headers=headers, timeout=10.0)
    assert response.status_code == 200


# Holding a slot without a token -----------------------------------------------------------------


def _sse_head(port: int, session: dict[str, str]) -> bytes:
    fields = "".join(f"{name}: {value}\r\n" for name, value in {**session, "accept": "text/event-stream"}.items())
    return f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{fields}\r\n".encode("latin-1")


@pytest.mark.anyio
async def test_an_empty_line_after_an_sse_stream_head_does_not_cut_the_stream_rfc9112_2_2(
    http: httpx.AsyncClient, quick: ServerProcess
) -> None:
    """RFC 9112 §2.2: a server ignores empty lines before a request line. One sent while a stream is
    in flight must not start the head deadline that would close the stream with it."""
    session = await open_session(http, quick.token())
    with connect(quick.port) as sock:
        sock.sendall(_sse_head(quick.port, session))
        received = sock.recv(65536)
        assert received.startswith(b"HTTP/1.1 200 ")
        sock.sendall(b"\r\n")
        while received.count(b"\n:") < 6:  # three seconds of keep-alives: three header timeouts
            chunk = sock.recv(65536)
            assert chunk, "the stream was closed"
            received += chunk


def test_pipelined_unauthenticated_requests_never_read_neither_pin_the_cap_nor_hold_memory(tmp_path: Path) -> None:
    """Thousands of heads in one write queued thousands of requests whose 401s the client never read,
    holding every slot with a request in flight and megabytes each. Now a connection queues a few,
    is answered, and closes; a client that stops reading is cut after the body timeout."""
    with start_server(tmp_path, env={**QUICK, "AQL_MCP_HTTP__MAX_CONNECTIONS": "16"}) as server:
        before = rss_kib(server.process.pid)
        with ExitStack() as stack:
            attackers = []
            for _ in range(16):
                sock = stack.enter_context(connect(server.port))
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                sock.sendall(f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n\r\n".encode() * 12_000)
                attackers.append(sock)
            until(lambda: _health(server) == 200, "the pipelining connections pinned the cap")
            assert rss_kib(server.process.pid) - before < 64 * 1024
            assert all(is_closed_by_peer(sock) for sock in attackers)


def _exchange(sock: socket.socket, request: bytes) -> RawResponse:
    sock.sendall(request)
    return read_response(sock)


def _health_request(port: int) -> bytes:
    return f"GET /health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode("latin-1")


def test_a_connect_flood_at_the_cap_evicts_neither_an_idle_authenticated_nor_an_idle_served_connection(
    tmp_path: Path,
) -> None:
    """Eviction takes connections that never completed a request first, and never one younger than a
    second: a flood of empty connections only competes with itself (docs/connections.md)."""
    with start_server(tmp_path, env={**CROWDED, "AQL_MCP_HTTP__MAX_CONNECTIONS": "16"}) as server:
        body = initialize_body()
        with connect(server.port) as trusted, connect(server.port) as served, ExitStack() as flood:
            assert _exchange(trusted, mcp_post(server.port, server.token(), len(body)) + body).status == 200
            assert _exchange(served, _health_request(server.port)).status == 200
            for _ in range(200):
                flood.enter_context(connect(server.port))
            assert _exchange(trusted, _health_request(server.port)).status == 200
            assert _exchange(served, _health_request(server.port)).status == 200


def test_at_the_cap_an_idle_connection_that_never_showed_a_token_goes_before_older_authenticated_ones(
    tmp_path: Path,
) -> None:
    with start_server(tmp_path, env={**CROWDED, "AQL_MCP_HTTP__MAX_CONNECTIONS": "16"}) as server, ExitStack() as stack:
        authenticated = mcp_post(server.port, server.token(), 2) + b"{}"  # refused after authentication
        trusted = [stack.enter_context(connect(server.port)) for _ in range(15)]
        for sock in trusted:
            assert _exchange(sock, authenticated).status < 500
        served = stack.enter_context(connect(server.port))
        assert _exchange(served, _health_request(server.port)).status == 200
        until(lambda: _health(server) == 200, "no connection was ever evicted")
        assert is_closed_by_peer(served)
        assert _exchange(trusted[0], _health_request(server.port)).status == 200
