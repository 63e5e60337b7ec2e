"""The records plugin as the end-to-end tests call it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
from mcp import ClientSession
from mcp.client.session import ElicitationFnT
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.operations.envelope import check_introspection, check_result
from tests.support.server import ServerProcess

DEADLINE = 20.0
Call = Callable[..., Awaitable[dict[str, Any]]]


@asynccontextmanager
async def aql_client(
    server: ServerProcess, subject: str = "tester", elicitation_callback: ElicitationFnT | None = None
) -> AsyncIterator[Call]:
    """An initialized official-client session; yields `call(tool, operation, **params)` -> the envelope,
    checked against the MCP-AQL schema rules and against `structuredContent`."""
    http = create_mcp_http_client(headers={"authorization": f"Bearer {server.token(subject=subject)}"})
    async with (
        http,
        streamable_http_client(server.url, http_client=http) as (read, write),
        ClientSession(read, write, elicitation_callback=elicitation_callback) as session,
    ):
        with anyio.fail_after(DEADLINE):
            await session.initialize()

            async def call(tool: str, operation: str, **params: Any) -> dict[str, Any]:
                result = await session.call_tool(tool, {"operation": operation, "params": params})
                envelope = json.loads(result.content[0].text)  # type: ignore[union-attr]
                assert result.structured_content == envelope
                return check_introspection(envelope) if operation == "introspect" else check_result(envelope)

            yield call


ELICIT = {"AQL_MCP_AQL__CONFIRM_WITH_ELICITATION": "true"}
