"""The official `mcp` Python client (2.3.0) drives a real server on 127.0.0.1 over Streamable HTTP.

A client written by others is the judge of the legacy era (MCP 2025-11-25): the handshake, every
method family, progress, logging, sampling and elicitation through the client's callbacks,
subscriptions on the GET stream, cancellation, resumption after the server closes a connection,
and DELETE when the client closes.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import ClientSession, types
from mcp.client import ClientRequestContext, IncomingMessage
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.message import ClientMessageMetadata

from aql_mcp import __version__
from tests.support.asgi import MCP_HEADERS, rpc
from tests.support.server import ServerProcess
from tests.support.wait import eventually

pytestmark = [
    pytest.mark.anyio,
    # The client marks the legacy-era methods (logging/setLevel, resources/subscribe) deprecated as of 2026-07-28.
    pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning"),
]

DEADLINE = 5.0
WATCHED = "test://watched-resource"
PROGRESS_TOOL = "test_tool_with_progress"


@dataclass(frozen=True)
class Exchange:
    method: str
    status: int
    content_type: str
    last_event_id: str | None


@dataclass
class Wire:
    """The client's HTTP traffic as seen from its own HTTP client: every response, the session id."""

    exchanges: list[Exchange] = field(default_factory=list)
    session_id: str | None = None
    get_stream_open: anyio.Event = field(default_factory=anyio.Event)

    async def record(self, response: httpx2.Response) -> None:
        request = response.request
        last_event_id = request.headers.get("last-event-id")
        content_type = response.headers.get("content-type", "").partition(";")[0]
        self.exchanges.append(Exchange(request.method, response.status_code, content_type, last_event_id))
        self.session_id = response.headers.get("mcp-session-id", self.session_id)
        if request.method == "GET" and response.status_code == 200 and last_event_id is None:
            self.get_stream_open.set()


@asynccontextmanager
async def connect(server: ServerProcess, **callbacks: Any) -> AsyncIterator[tuple[ClientSession, Wire]]:
    """An initialized client session; leaving it closes the session the way the client does (DELETE)."""
    wire = Wire()
    http = create_mcp_http_client(headers={"authorization": f"Bearer {server.token()}"})
    http.event_hooks["response"].append(wire.record)
    async with (
        http,
        streamable_http_client(server.url, http_client=http) as (read, write),
        ClientSession(read, write, read_timeout_seconds=DEADLINE, **callbacks) as session,
    ):
        with anyio.fail_after(DEADLINE):
            await session.initialize()
        yield session, wire


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))


async def test_initialize_negotiates_2025_11_25_and_declares_the_server_capabilities(server: ServerProcess) -> None:
    """MCP 2025-11-25 `basic/lifecycle`, "Initialization": the server answers with its version, info, capabilities."""
    async with connect(server) as (session, wire):
        result = session.initialize_result

    assert result is not None
    assert result.protocol_version == "2025-11-25"
    assert result.server_info.name == "aql-mcp"
    assert result.server_info.version == __version__
    caps = result.capabilities
    assert caps.tools is not None
    assert caps.prompts is not None
    assert caps.resources is not None
    assert caps.resources.subscribe is True
    assert caps.logging is not None
    assert caps.completions is not None
    assert wire.session_id


async def test_the_client_lists_tools_prompts_resources_and_templates(server: ServerProcess) -> None:
    async with connect(server) as (session, _):
        tools = await session.list_tools()
        prompts = await session.list_prompts()
        resources = await session.list_resources()
        templates = await session.list_resource_templates()

    assert {"test_simple_text", PROGRESS_TOOL, "test_sampling"} <= {tool.name for tool in tools.tools}
    assert all(tool.input_schema["type"] == "object" for tool in tools.tools)
    assert {"test_simple_prompt", "test_prompt_with_arguments"} <= {prompt.name for prompt in prompts.prompts}
    assert {"test://static-text", WATCHED} <= {str(resource.uri) for resource in resources.resources}
    assert "test://template/{id}/data" in {template.uri_template for template in templates.resource_templates}


async def test_a_tool_call_returns_the_tool_text(server: ServerProcess) -> None:
    async with connect(server) as (session, _):
        result = await session.call_tool("test_simple_text", {})

    assert result.is_error is False
    assert [block.type for block in result.content] == ["text"]
    assert text_of(result)


async def test_the_client_reads_a_static_resource_and_a_template_resource(server: ServerProcess) -> None:
    async with connect(server) as (session, _):
        static = await session.read_resource("test://static-text")
        templated = await session.read_resource("test://template/42/data")

    [content] = static.contents
    assert str(content.uri) == "test://static-text"
    assert isinstance(content, types.TextResourceContents)
    assert content.text
    [data] = templated.contents
    assert str(data.uri) == "test://template/42/data"
    assert data.mime_type == "application/json"
    assert isinstance(data, types.TextResourceContents)
    assert json.loads(data.text)["id"] == "42"


async def test_a_prompt_is_rendered_with_the_client_arguments(server: ServerProcess) -> None:
    async with connect(server) as (session, _):
        prompt = await session.get_prompt("test_prompt_with_arguments", {"arg1": "alpha", "arg2": "beta"})

    [message] = prompt.messages
    assert message.role == "user"
    assert isinstance(message.content, types.TextContent)
    assert "alpha" in message.content.text
    assert "beta" in message.content.text


async def test_completion_suggests_values_for_a_prompt_argument(server: ServerProcess) -> None:
    async with connect(server) as (session, _):
        reference = types.PromptReference(type="ref/prompt", name="test_prompt_with_arguments")
        result = await session.complete(reference, {"name": "arg1", "value": "te"})

    assert result.completion.values
    assert all(value.startswith("te") for value in result.completion.values)


async def test_progress_notifications_reach_the_callback_before_the_result(server: ServerProcess) -> None:
    """MCP 2025-11-25 `basic/utilities/progress`: progress MUST increase with each notification."""
    updates: list[tuple[float, float | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        updates.append((progress, total))

    async with connect(server) as (session, _):
        result = await session.call_tool(PROGRESS_TOOL, {}, progress_callback=on_progress)
        seen_before_result = list(updates)

    assert result.is_error is False
    assert len(seen_before_result) == 3
    values = [progress for progress, _ in seen_before_result]
    assert values == sorted(set(values))
    assert all(total == 100 for _, total in seen_before_result)


async def test_log_messages_reach_the_logging_callback(server: ServerProcess) -> None:
    messages: list[types.LoggingMessageNotificationParams] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        messages.append(params)

    async with connect(server, logging_callback=on_log) as (session, _):
        await session.set_logging_level("debug")
        result = await session.call_tool("test_tool_with_logging", {})
        seen_before_result = list(messages)

    assert result.is_error is False
    assert len(seen_before_result) >= 3
    assert all(message.level == "info" and message.data for message in seen_before_result)


async def test_a_sampling_tool_gets_the_answer_of_the_client_callback(server: ServerProcess) -> None:
    asked: list[types.CreateMessageRequestParams] = []

    async def sample(
        context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        asked.append(params)
        answer = types.TextContent(type="text", text="four, from the client model")
        return types.CreateMessageResult(role="assistant", content=answer, model="e2e-model", stop_reason="endTurn")

    async with connect(server, sampling_callback=sample) as (session, _):
        result = await session.call_tool("test_sampling", {"prompt": "What is 2+2?"})

    assert result.is_error is False
    assert "four, from the client model" in text_of(result)
    [params] = asked
    assert isinstance(params.messages[0].content, types.TextContent)
    assert params.messages[0].content.text == "What is 2+2?"


async def test_an_elicitation_tool_gets_the_answer_of_the_client_callback(server: ServerProcess) -> None:
    asked: list[types.ElicitRequestParams] = []

    async def elicit(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"username": "ada", "email": "ada@example.com"})

    async with connect(server, elicitation_callback=elicit) as (session, _):
        result = await session.call_tool("test_elicitation", {"message": "Who are you?"})

    assert result.is_error is False
    assert "accept" in text_of(result)
    assert "ada@example.com" in text_of(result)
    [params] = asked
    assert params.message == "Who are you?"


async def test_a_client_without_sampling_gets_an_error_result_and_no_sampling_request(server: ServerProcess) -> None:
    """MCP 2025-11-25 `basic/lifecycle`, "Capability Negotiation": only negotiated capabilities may be used."""
    async with connect(server) as (session, wire):
        before = len(wire.exchanges)
        result = await session.call_tool("test_sampling", {"prompt": "What is 2+2?"})
        answers = [e.content_type for e in wire.exchanges[before:] if e.method == "POST" and e.status == 200]

    assert result.is_error is True
    # A sampling request would have turned the answer into an SSE stream.
    assert answers == ["application/json"]


async def test_a_subscribed_resource_update_reaches_the_message_handler(server: ServerProcess) -> None:
    """MCP 2025-11-25 `server/resources`, "Subscriptions": the server sends `notifications/resources/updated`."""
    updated = anyio.Event()
    uris: list[str] = []

    async def on_message(message: IncomingMessage) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            uris.append(str(message.params.uri))
            updated.set()

    async with connect(server, message_handler=on_message) as (session, wire):
        with anyio.fail_after(DEADLINE):
            await session.subscribe_resource(WATCHED)
            await wire.get_stream_open.wait()  # server-initiated notifications travel on the GET stream
            await session.call_tool("test_update_watched_resource", {})
            await updated.wait()

    assert uris == [WATCHED]


async def test_cancelling_a_call_stops_its_handler_and_the_session_stays_usable(server: ServerProcess) -> None:
    """MCP 2025-11-25 `basic/utilities/cancellation`; corporate §8.5: stop the cancelled request's work."""
    running = anyio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        running.set()

    cancelled_before = server.log_text().count('"request_cancelled"')
    async with connect(server) as (session, _):
        with anyio.fail_after(DEADLINE):
            call = anyio.CancelScope()

            async def run_call() -> None:
                with call:
                    await session.call_tool(PROGRESS_TOOL, {}, progress_callback=on_progress)

            async with anyio.create_task_group() as group:
                group.start_soon(run_call)
                await running.wait()
                call.cancel()  # the client sends notifications/cancelled for the abandoned request
            await eventually(
                lambda: server.log_text().count('"request_cancelled"') > cancelled_before,
                "the cancellation was never logged",
            )
            await session.send_ping()
            after = await session.call_tool("test_simple_text", {})

    assert call.cancelled_caught
    assert after.is_error is False


async def test_a_call_whose_connection_the_server_closes_completes_on_the_resumed_stream(
    server: ServerProcess,
) -> None:
    """MCP 2025-11-25 `basic/transports`, "Resumability and Redelivery": resume with GET and `Last-Event-ID`."""
    tokens: list[str] = []

    async def on_token(token: str) -> None:
        tokens.append(token)

    request = types.CallToolRequest(params=types.CallToolRequestParams(name="test_reconnection", arguments={}))
    metadata = ClientMessageMetadata(on_resumption_token_update=on_token)
    async with connect(server) as (session, wire):
        with anyio.fail_after(DEADLINE):
            result = await session.send_request(request, types.CallToolResult, metadata=metadata)

    assert result.is_error is False
    assert text_of(result)
    assert tokens
    resumed = [e for e in wire.exchanges if e.method == "GET" and e.last_event_id == tokens[0]]
    assert [(e.status, e.content_type) for e in resumed] == [(200, "text/event-stream")]


async def test_a_client_resumes_a_finished_call_with_its_resumption_token(server: ServerProcess) -> None:
    """The client hands an event id back as `resumption_token`; the server replays what followed it."""
    tokens: list[str] = []

    async def on_token(token: str) -> None:
        tokens.append(token)

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        return None

    params = types.CallToolRequestParams(name=PROGRESS_TOOL, arguments={})
    async with connect(server) as (session, wire):
        with anyio.fail_after(DEADLINE):
            first = await session.send_request(
                types.CallToolRequest(params=params),
                types.CallToolResult,
                metadata=ClientMessageMetadata(on_resumption_token_update=on_token),
                progress_callback=on_progress,
            )
            again = await session.send_request(
                types.CallToolRequest(params=params),
                types.CallToolResult,
                metadata=ClientMessageMetadata(resumption_token=tokens[0]),
            )

    assert first.is_error is False
    assert again.model_dump() == first.model_dump()
    assert [e.method for e in wire.exchanges if e.last_event_id == tokens[0]] == ["GET"]


async def test_closing_the_client_deletes_the_session(server: ServerProcess) -> None:
    """MCP 2025-11-25 `basic/transports`, "Session Management": after DELETE the session id answers 404."""
    async with connect(server) as (session, wire):
        await session.send_ping()

    assert wire.exchanges[-1].method == "DELETE"
    assert wire.exchanges[-1].status in (200, 204)
    headers = {
        **MCP_HEADERS,
        "authorization": f"Bearer {server.token()}",
        "mcp-session-id": str(wire.session_id),
        "mcp-protocol-version": "2025-11-25",
    }
    async with httpx.AsyncClient(timeout=DEADLINE) as http:
        response = await http.post(server.url, json=rpc("tools/list", {}), headers=headers)

    assert response.status_code == 404
    assert response.json()["error"]["code"] == -32001
