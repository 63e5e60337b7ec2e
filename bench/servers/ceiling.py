"""The framework ceiling: bare Starlette that parses the JSON-RPC body and answers by hand.

No MCP logic, no sessions, no validation: what uvicorn + Starlette + JSON cost per request.
`initialize` gets a fixed result and notifications 202, so the handshake loop runs too.
Run with `uvicorn --app-dir bench/servers --factory ceiling:create_app`.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

INITIALIZE_RESULT = {
    "protocolVersion": "2025-11-25",
    "capabilities": {"tools": {}},
    "serverInfo": {"name": "bench-ceiling", "version": "0"},
}


def result_for(message: dict[str, Any]) -> dict[str, Any]:
    if message.get("method") == "initialize":
        return INITIALIZE_RESULT
    text = message["params"]["arguments"]["text"]
    return {"content": [{"type": "text", "text": text}], "isError": False}


async def mcp(request: Request) -> Response:
    message = json.loads(await request.body())
    if "id" not in message:
        return Response(status_code=202)
    body = {"jsonrpc": "2.0", "id": message["id"], "result": result_for(message)}
    return Response(json.dumps(body, separators=(",", ":")), media_type="application/json")


def create_app() -> Starlette:
    return Starlette(routes=[Route("/mcp", mcp, methods=["POST"])])
