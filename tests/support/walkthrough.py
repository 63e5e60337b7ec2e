"""What a user of aql-mcp does, walked through by the official Python `mcp` client; the TypeScript
client's walk is tests/ts_gateway_walkthrough.mjs, and both print the same summary, so a test checks
them the same way.

The steps: tools, resources, prompts, an MCP-AQL write and a read of it, a delete the user confirms
by elicitation, changes of a watched resource heard on a stream (the legacy session's GET stream or
a modern `subscriptions/listen`), and a long call reporting progress. Every HTTP request carries an
X-Request-Id of its own, listed in the summary with what it carried, so that a test behind a gateway
can ask the replicas' access logs which replica served which request (`Replicas.served`).
"""

from __future__ import annotations

import uuid
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
import orjson
from mcp import Client, types
from mcp.client import ClientRequestContext, IncomingMessage
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT
from mcp.shared.exceptions import MCPDeprecationWarning

WATCHED = "test://watched-resource"
LEGACY = "2025-11-25"
DEADLINE = 20.0
SLOW_DEADLINE = 30.0


class Wire:
    """httpx event hooks: tag each request with an X-Request-Id and note it, its status and any session id."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.session_ids: list[str] = []

    async def request(self, request: httpx2.Request) -> None:
        request_id = uuid.uuid4().hex
        request.headers["x-request-id"] = request_id
        entry: dict[str, Any] = {"http": request.method, "methods": [], "name": None, "id": request_id, "status": None}
        body = orjson.loads(request.content) if request.content else []
        for message in body if isinstance(body, list) else [body]:
            if "method" in message:
                entry["methods"].append(message["method"])
            if message.get("method") == "tools/call":
                entry["name"] = message["params"]["name"]
            if "result" in message or "error" in message:
                entry["methods"].append("(response)")
        self.requests.append(entry)

    async def response(self, response: httpx2.Response) -> None:
        request_id = response.request.headers["x-request-id"]
        next(entry for entry in self.requests if entry["id"] == request_id)["status"] = response.status_code
        session = response.headers.get("mcp-session-id")
        if session and session not in self.session_ids:
            self.session_ids.append(session)


def _text(blocks: list[Any]) -> str:
    return "\n".join(block.text for block in blocks if isinstance(block, types.TextContent))


async def python_walkthrough(url: str, token: str, mode: str, slow: dict[str, Any]) -> dict[str, Any]:
    """The walk with `mcp.Client` in `mode` ("legacy" or "auto") against `url`; the summary."""
    wire = Wire()
    asked: list[str] = []
    heard_in, heard = anyio.create_memory_object_stream[str](16)

    async def confirm(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"confirm": True})

    async def on_message(message: IncomingMessage) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            await heard_in.send(str(message.params.uri))

    http = httpx2.AsyncClient(
        headers={"authorization": f"Bearer {token}"},
        timeout=httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT),
        event_hooks={"request": [wire.request], "response": [wire.response]},
    )
    transport = streamable_http_client(url, http_client=http)
    summary: dict[str, Any] = {}
    async with (
        http,
        heard_in,
        heard,
        Client(transport, mode=mode, elicitation_callback=confirm, message_handler=on_message) as client,
    ):
        with anyio.fail_after(DEADLINE):
            # What the client says it negotiated; the test checks the wire agrees.
            summary["era"] = "legacy" if client.protocol_version == LEGACY else "modern"
            summary["protocolVersion"] = client.protocol_version
            summary |= await _primitives(client)
            summary |= await _records(client, f"py_{mode}_{uuid.uuid4().hex[:6]}", asked)
        summary |= await _changes_around_a_long_call(client, wire, heard, slow)
    summary["wire"] = {"requests": wire.requests, "sessionIds": wire.session_ids}
    return summary


async def _primitives(client: Client) -> dict[str, Any]:
    tools = await client.list_tools()
    resources = await client.list_resources()
    read = await client.read_resource("test://static-text")
    prompts = await client.list_prompts()
    prompt = await client.get_prompt("test_prompt_with_arguments", {"arg1": "one", "arg2": "two"})
    return {
        "tools": [tool.name for tool in tools.tools],
        "resources": [str(resource.uri) for resource in resources.resources],
        "resourceText": "\n".join(getattr(content, "text", "") for content in read.contents),
        "prompts": [prompt.name for prompt in prompts.prompts],
        "prompt": [_text([message.content]) for message in prompt.messages],
    }


async def _records(client: Client, collection: str, asked: list[str]) -> dict[str, Any]:
    """An MCP-AQL write and a read of it, then the delete the user confirms by elicitation."""

    async def aql(tool: str, operation: str, **params: Any) -> dict[str, Any]:
        result = await client.call_tool(tool, {"operation": operation, "params": params})
        return {"isError": result.is_error, "envelope": result.structured_content}

    await aql("mcp_aql_create", "create_collection", collection=collection)
    written = await aql("mcp_aql_create", "create_record", collection=collection, data={"title": "via nginx", "n": 1})
    record_id = (written["envelope"] or {}).get("data", {}).get("id")
    read_back = await aql("mcp_aql_read", "get_record", collection=collection, id=record_id)
    deleted = await aql("mcp_aql_delete", "delete_collection", collection=collection)
    listed = await aql("mcp_aql_read", "list_collections")
    items = (listed["envelope"] or {}).get("data", {}).get("items", [])
    return {
        "collection": collection,
        "written": written,
        "readBack": read_back,
        "deleted": deleted,
        "asked": [{"message": message} for message in asked],
        "collectionsAfter": [item["name"] for item in items],
    }


async def _changes_around_a_long_call(
    client: Client, wire: Wire, heard: anyio.abc.ObjectReceiveStream[str], slow: dict[str, Any]
) -> dict[str, Any]:
    """On one stream: a change of the watched resource heard, the long call, a second change heard
    (the stream outlived the call)."""
    cause_ids: list[str] = []
    heard_uris: list[str] = []

    async def change(receive: Callable[[], Awaitable[str]]) -> None:
        with anyio.fail_after(DEADLINE):
            before = len(wire.requests)
            await client.call_tool("test_update_watched_resource", {})
            cause_ids.extend(e["id"] for e in wire.requests[before:] if e["name"] == "test_update_watched_resource")
            heard_uris.append(await receive())

    async with _hearing(client, heard) as receive:
        await change(receive)
        with anyio.fail_after(SLOW_DEADLINE):
            long_call = await _long_call(client, slow)
        await change(receive)
    return {"causes": cause_ids, "heard": heard_uris, **long_call}


@asynccontextmanager
async def _hearing(
    client: Client, legacy_notifications: anyio.abc.ObjectReceiveStream[str]
) -> AsyncIterator[Callable[[], Awaitable[str]]]:
    """A stream of the watched resource's changes: the session's GET stream with a resource
    subscription (2025-11-25), or `subscriptions/listen` (2026-07-28); yields "the next change"."""
    if client.protocol_version == LEGACY:
        with warnings.catch_warnings():
            # resources/subscribe is what this era has; the SDK flags it for the modern one.
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await client.subscribe_resource(WATCHED)
        yield legacy_notifications.receive
        return
    async with client.listen(resource_subscriptions=[WATCHED]) as subscription:

        async def next_event() -> str:
            event = await anext(subscription)
            return str(getattr(event, "uri", event))

        yield next_event


async def _long_call(client: Client, arguments: dict[str, Any]) -> dict[str, Any]:
    reported: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        reported.append(progress)

    result = await client.call_tool("test_slow", arguments, progress_callback=on_progress)
    return {"progress": reported, "slow": {"isError": result.is_error, "text": _text(result.content)}}
