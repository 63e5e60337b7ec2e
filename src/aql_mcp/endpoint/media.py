"""Content negotiation on `/mcp`: what a request body must be, how it is read, and what a client
must accept.

POST bodies are `application/json`; a POST must accept both JSON and SSE, a GET SSE (MCP
2025-11-25 transports, corporate §6). A refusal is 415 or 406.
"""

from __future__ import annotations

import functools

from starlette.types import Receive, Scope

from aql_mcp.exceptions import InvalidRequest, NotAcceptable, UnsupportedMediaType
from aql_mcp.scope import header


def check_content_type(scope: Scope) -> None:
    value = header(scope, b"content-type") or ""
    if value.split(";", 1)[0].strip().lower() != "application/json":
        raise UnsupportedMediaType()


def check_accept(scope: Scope, *, post: bool) -> None:
    """POST must accept JSON and SSE, GET must accept SSE (2025-11-25 transports; corporate §6)."""
    if not is_acceptable(header(scope, b"accept") or "", post):
        needed = "application/json and text/event-stream" if post else "text/event-stream"
        raise NotAcceptable(f"Not acceptable: Accept must include {needed}")


@functools.lru_cache(maxsize=256)
def is_acceptable(accept: str, post: bool) -> bool:
    """Whether an Accept value takes the answer; cached, as clients send the same value every time."""
    media = {part.split(";", 1)[0].strip().lower() for part in accept.split(",")}
    if "*/*" in media:
        return True
    sse = "text/event-stream" in media or "text/*" in media
    json = "application/json" in media or "application/*" in media
    return sse and (json or not post)


async def read_body(receive: Receive) -> bytes:
    # The body-limit middleware in front has already capped what `receive` can deliver.
    chunks = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise InvalidRequest("Invalid request: the client went away")
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)
