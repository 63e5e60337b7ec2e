"""Attacks on connections, before any ASGI work (issue 12, "Availability and resources"): huge and
unfinished request heads, too many headers, silent and trickling connections, slow bodies, more
connections than the replica can hold, and the metrics port.

Every refusal is a complete HTTP answer with a JSON-RPC error body (431 / -32005, 408 / -32004,
503 / -32006; corporate §13.2, §14) and `connection: close`; nothing internal in it.
"""

from __future__ import annotations

import resource
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
    open_file_limits,
    read_response,
    rss_kib,
    send_until_answered,
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


def test_beyond_max_connections_a_new_connection_gets_a_clean_503_and_service_resumes(tmp_path: Path) -> None:
    env = {"AQL_MCP_HTTP__MAX_CONNECTIONS": "16", "AQL_MCP_HTTP__HEADER_TIMEOUT_SECONDS": "60"}
    with start_server(tmp_path, env=env) as server:
        with slow_connections(server.port, 16), connect(server.port) as sock:
            response = read_response(sock)  # nothing sent: the refusal comes before any reading
            error = assert_refusal(response, 503, -32006)
            assert error["data"]["limit"] == "connections"
            assert response.headers["retry-after"] == str(error["data"]["retryAfter"])
        until(lambda: _health(server) == 200, "the service did not resume after the connections closed")
        assert "connection_limits" in server.log_text()


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


def test_an_initialize_after_a_refusal_on_another_connection_still_works(quick: ServerProcess) -> None:
    with connect(quick.port) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\n" + b"X: y\r\n" * 200 + b"\r\n")
        assert_refusal(read_response(sock), 431, -32005)
    headers = {**MCP_HEADERS, "authorization": f"Bearer {quick.token()}"}
    body = orjson.dumps(rpc("initialize", initialize_params()))
    response = httpx.post(quick.url, content=body, headers=headers, timeout=10.0)
    assert response.status_code == 200
