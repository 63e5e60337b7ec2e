"""What the official `mcp` Python client (2.3.0) reports for each limit and auth refusal of a real server.

Every refusal below is a JSON-RPC error body (`"id": null` when refused before the body is read, else
the request's id); the client reads it even at a non-2xx status and raises
`mcp.shared.exceptions.MCPError` with the body's `code`, `message` and `data`. The client exposes no
HTTP status or header: `Retry-After` reaches the caller only as `error.data["retryAfter"]`.

| Limit               | Setting                             | HTTP      | `MCPError` code, data |
| ------------------- | ----------------------------------- | --------- | --------------------- |
| no token            | -                                   | 401       | -32000 `{}` |
| invalid token       | -                                   | 401       | -32000 `{}` |
| scope missing       | `auth.required_scopes`              | 403       | -32000 `{reason: insufficient_scope, scope}` |
| body too large      | `http.max_body_bytes`               | 413       | -32005 `{limit: request_body, maxBytes}` |
| request rate        | `limits.rate_per_second`            | 429       | -32003 `{retryAfter}` |
| concurrent calls    | `limits.max_concurrent_calls`       | 429       | -32003 `{retryAfter: 1}` |
| sessions per caller | `limits.max_sessions_per_principal` | 429       | -32003 `{retryAfter}` |
| session table full  | `sessions.max_open`                 | 503       | -32006 `{retryAfter}` |
| tool timeout (JSON) | `limits.tool_timeout_seconds`       | 504       | -32004 `{timeoutSeconds}` |
| tool timeout (SSE)  | `limits.tool_timeout_seconds`       | 200 (SSE) | -32004 `{timeoutSeconds}` |

Every 429 and 503 carries `Retry-After` equal to `data.retryAfter`: for the request rate
(`limits.rate_per_second` with `limits.rate_burst`) the whole seconds until the caller's bucket has a
token again, for concurrent calls 1, for both session limits `sessions.retry_after_seconds`. A tool
that has already sent something (a log message, progress) has turned its response into an SSE stream
(`200 (SSE)`), so its timeout arrives as the stream's last event and cannot change the status.
Every `data` also carries `requestId` (the `X-Request-Id` of the exchange). `message` is the
service's safe text (e.g. "Rate limited; retry later") and is not pinned here.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx2
import pytest
from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from tests.support.server import ServerProcess, start_server

pytestmark = [
    pytest.mark.anyio,
    # The client marks the legacy-era logging/setLevel deprecated as of 2026-07-28.
    pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning"),
]

DEADLINE = 5.0
MAX_BODY_BYTES = 2048
# The slow tool sleeps 50 ms twice: a deadline in the middle of its second sleep is never a race with
# its end (at 100 ms the last step would return without an await for the cancellation to land on).
TOOL_TIMEOUT = 0.075
RATE_BURST = 8
SESSION_RETRY_AFTER = 30
SLOW_TOOL = "test_tool_with_logging"  # three log messages 50 ms apart
LIMITS = {
    "AQL_MCP_HTTP__MAX_BODY_BYTES": str(MAX_BODY_BYTES),
    # Every row below uses its own subject, so each has a whole bucket; one request in 2 s refills it.
    "AQL_MCP_LIMITS__RATE_PER_SECOND": "0.5",
    "AQL_MCP_LIMITS__RATE_BURST": str(RATE_BURST),
    "AQL_MCP_LIMITS__TOOL_TIMEOUT_SECONDS": str(TOOL_TIMEOUT),
    "AQL_MCP_LIMITS__MAX_SESSIONS_PER_PRINCIPAL": "1",
    "AQL_MCP_LIMITS__MAX_CONCURRENT_CALLS": "1",
    "AQL_MCP_SESSIONS__RETRY_AFTER_SECONDS": str(SESSION_RETRY_AFTER),
    "AQL_MCP_AUTH__REQUIRED_SCOPES": json.dumps(["mcp"]),
    # No drain period on SIGTERM: the module's teardown need not wait for a load balancer.
    "AQL_MCP_SHUTDOWN__DRAIN_SECONDS": "0",
}
# A whole session table of one: the second caller's initialize finds it full.
CROWDED = {
    "AQL_MCP_SESSIONS__MAX_OPEN": "1",
    "AQL_MCP_SESSIONS__RETRY_AFTER_SECONDS": str(SESSION_RETRY_AFTER),
    "AQL_MCP_SHUTDOWN__DRAIN_SECONDS": "0",
}


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with start_server(tmp_path_factory.mktemp("limited"), env=LIMITS) as process:
        yield process


@pytest.fixture(scope="module")
def crowded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with start_server(tmp_path_factory.mktemp("crowded"), env=CROWDED) as process:
        yield process


@dataclass
class Wire:
    """Status and Retry-After of every POST the client made, as its own HTTP client saw them."""

    posts: list[tuple[int, str | None]] = field(default_factory=list)

    async def record(self, response: httpx2.Response) -> None:
        if response.request.method == "POST":
            self.posts.append((response.status_code, response.headers.get("retry-after")))


@asynccontextmanager
async def client(
    server: ServerProcess, wire: Wire, authorization: str | None, **callbacks: Any
) -> AsyncIterator[ClientSession]:
    """A client session, not yet initialized (initializing may be what fails)."""
    http = create_mcp_http_client(headers={"authorization": authorization} if authorization else None)
    http.event_hooks["response"].append(wire.record)
    async with (
        http,
        streamable_http_client(server.url, http_client=http) as (read, write),
        ClientSession(read, write, read_timeout_seconds=DEADLINE, **callbacks) as session,
    ):
        yield session


def bearer(server: ServerProcess, subject: str, scopes: tuple[str, ...] = ("mcp",)) -> str:
    return f"Bearer {server.token(subject=subject, scopes=scopes)}"


# How each limit is reached; returns what the client raised. Raising inside the client's context keeps
# the error out of the exception groups its task groups would wrap it in.
Provoke = Callable[[ServerProcess, Wire], Awaitable[MCPError]]


async def raised(step: Awaitable[Any]) -> MCPError:
    try:
        await step
    except MCPError as error:
        return error
    raise AssertionError("the client reported no error")


async def no_token(server: ServerProcess, wire: Wire) -> MCPError:
    async with client(server, wire, None) as session:
        return await raised(session.initialize())


async def invalid_token(server: ServerProcess, wire: Wire) -> MCPError:
    async with client(server, wire, "Bearer not-a-token") as session:
        return await raised(session.initialize())


async def missing_scope(server: ServerProcess, wire: Wire) -> MCPError:
    async with client(server, wire, bearer(server, "scopeless", scopes=("read",))) as session:
        return await raised(session.initialize())


async def body_too_large(server: ServerProcess, wire: Wire) -> MCPError:
    async with client(server, wire, bearer(server, "body")) as session:
        await session.initialize()
        return await raised(session.call_tool("test_simple_text", {"padding": "x" * (2 * MAX_BODY_BYTES)}))


async def request_rate(server: ServerProcess, wire: Wire) -> MCPError:
    async def list_until_refused(session: ClientSession) -> None:
        for _ in range(RATE_BURST + 1):
            await session.list_tools()

    async with client(server, wire, bearer(server, "rate")) as session:
        await session.initialize()
        return await raised(list_until_refused(session))


async def sessions_per_principal(server: ServerProcess, wire: Wire) -> MCPError:
    token = bearer(server, "sessions")
    async with client(server, Wire(), token) as first:
        await first.initialize()
        async with client(server, wire, token) as second:
            return await raised(second.initialize())


async def concurrent_calls(server: ServerProcess, wire: Wire) -> MCPError:
    """A second call while the first is still running (its first log message proves it is)."""
    running = anyio.Event()

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        running.set()

    async def slow_call(session: ClientSession) -> None:
        await raised(session.call_tool(SLOW_TOOL, {}))  # it then times out: not the row under test

    async with client(server, wire, bearer(server, "concurrent"), logging_callback=on_log) as session:
        await session.initialize()
        await session.set_logging_level("info")
        async with anyio.create_task_group() as group:
            group.start_soon(slow_call, session)
            await running.wait()
            refused = await raised(session.list_tools())
    return refused


async def session_table_full(server: ServerProcess, wire: Wire) -> MCPError:
    async with client(server, Wire(), bearer(server, "first")) as first:
        await first.initialize()
        async with client(server, wire, bearer(server, "second")) as second:
            return await raised(second.initialize())


async def tool_timeout_json(server: ServerProcess, wire: Wire) -> MCPError:
    """Nothing is sent before the deadline (log level `emergency`), so the exchange is still plain JSON."""
    async with client(server, wire, bearer(server, "timeout-json")) as session:
        await session.initialize()
        await session.set_logging_level("emergency")
        return await raised(session.call_tool(SLOW_TOOL, {}))


async def tool_timeout_sse(server: ServerProcess, wire: Wire) -> MCPError:
    """A log message turns the exchange into SSE first; the timeout then ends the stream as its last event."""
    async with client(server, wire, bearer(server, "timeout-sse")) as session:
        await session.initialize()
        await session.set_logging_level("info")
        return await raised(session.call_tool(SLOW_TOOL, {}))


@dataclass(frozen=True)
class Row:
    provoke: Provoke
    status: int
    code: int
    data: dict[str, Any]
    data_keys: frozenset[str] = frozenset({"requestId"})
    server: str = "limited"


TABLE = {
    "no token": Row(no_token, 401, -32000, {}),
    "invalid token": Row(invalid_token, 401, -32000, {}),
    "scope missing": Row(missing_scope, 403, -32000, {"reason": "insufficient_scope", "scope": "mcp"}),
    "body too large": Row(body_too_large, 413, -32005, {"limit": "request_body", "maxBytes": MAX_BODY_BYTES}),
    "request rate": Row(request_rate, 429, -32003, {}, frozenset({"requestId", "retryAfter"})),
    "concurrent calls": Row(concurrent_calls, 429, -32003, {"retryAfter": 1}),
    "sessions per caller": Row(sessions_per_principal, 429, -32003, {"retryAfter": SESSION_RETRY_AFTER}),
    "session table full": Row(session_table_full, 503, -32006, {"retryAfter": SESSION_RETRY_AFTER}, server="crowded"),
    "tool timeout (JSON)": Row(tool_timeout_json, 504, -32004, {"timeoutSeconds": TOOL_TIMEOUT}),
    "tool timeout (SSE)": Row(tool_timeout_sse, 200, -32004, {"timeoutSeconds": TOOL_TIMEOUT}),
}


@pytest.mark.parametrize("limit", TABLE)
async def test_the_official_client_reports_each_limit_as_an_mcp_error_with_its_code(
    request: pytest.FixtureRequest, limit: str
) -> None:
    """Corporate §14 and Appendix B: each limit has its HTTP status and JSON-RPC code; the client sees the code."""
    row = TABLE[limit]
    server: ServerProcess = request.getfixturevalue(row.server)
    wire = Wire()

    with anyio.fail_after(DEADLINE):
        error = await row.provoke(server, wire)

    status, retry_after = wire.posts[-1]
    assert status == row.status
    assert error.code == row.code
    assert isinstance(error.data, dict)
    assert error.data.items() >= row.data.items()
    assert row.data_keys <= error.data.keys()
    if "retryAfter" in error.data:
        # Appendix C.2: Retry-After (MUST with 429); the client passes on the body's copy of it.
        assert isinstance(error.data["retryAfter"], int)
        assert error.data["retryAfter"] >= 1
        assert retry_after == str(error.data["retryAfter"])
