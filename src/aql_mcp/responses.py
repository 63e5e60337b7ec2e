"""The one translation ladder from exceptions to wire errors, and the raw ASGI senders.

Handlers raise; the edges call `error_object` and send what it returns. An exception that is
not a `WireError` becomes a generic -32603 whose full context goes only to the internal log,
tied to the request id (corporate §13.3, §15.2).
"""

from __future__ import annotations

from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

import orjson
import structlog
from starlette.types import Message, Send

from aql_mcp.exceptions import InternalError, WireError
from aql_mcp.jsonrpc.messages import RequestId, encode_error

JSON_HEADERS = [(b"content-type", b"application/json")]
log = structlog.get_logger("aql_mcp.errors")


class ResponseWatch:
    """`send`, remembering whether the response has started: until then a middleware may still
    answer an error of its own; after, it can only let the exception go on."""

    __slots__ = ("_send", "started")

    def __init__(self, send: Send) -> None:
        self._send = send
        self.started = False

    async def __call__(self, message: Message) -> None:
        self.started = self.started or message["type"] == "http.response.start"
        await self._send(message)


def header_fields(headers: Mapping[str, str]) -> list[tuple[bytes, bytes]]:
    """`headers` as ASGI header fields (Latin-1, as HTTP/1.1 carries them)."""
    return [(name.encode("latin-1"), value.encode("latin-1")) for name, value in headers.items()]


def error_object(exc: BaseException, request_id: str) -> tuple[WireError, dict[str, Any]]:
    """The wire error for `exc`, and the JSON-RPC `error` member that describes it."""
    if not isinstance(exc, WireError):
        log.error("internal_error", request_id=request_id, exc_info=exc)
        exc = InternalError()
    error: dict[str, Any] = {
        "code": exc.code,
        "message": exc.detail,
        "data": {**exc.data, "requestId": request_id},
    }
    return exc, error


async def send_error(send: Send, exc: BaseException, *, request_id: str, message_id: RequestId | None = None) -> None:
    """Answer the HTTP exchange with the error's status and a JSON-RPC error body."""
    wire, error = error_object(exc, request_id)
    await send_body(send, wire.status, encode_error(message_id, error), header_fields(wire.headers))


async def send_json(send: Send, status: int, payload: Any, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    await send_body(send, status, orjson.dumps(payload), headers)


async def send_body(
    send: Send,
    status: int,
    body: bytes,
    headers: list[tuple[bytes, bytes]] | None = None,
    content_type: bytes = b"application/json",
) -> None:
    raw = [(b"content-type", content_type), (b"content-length", str(len(body)).encode()), *(headers or ())]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


async def send_empty(send: Send, status: int, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-length", b"0"), *(headers or ())],
        }
    )
    await send({"type": "http.response.body", "body": b""})


def error_response(error: WireError, *, request_id: str, headers: list[tuple[bytes, bytes]]) -> bytes:
    """A whole HTTP/1.1 response carrying `error`, for a connection refused before any ASGI app
    runs (server/connection.py): the JSON-RPC error with id null, then `connection: close`."""
    wire, body_error = error_object(error, request_id)
    body = encode_error(None, body_error)
    fields = [
        *headers,
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode("ascii")),
        *header_fields({k: v for k, v in wire.headers.items() if k != "connection"}),
        (b"connection", b"close"),
    ]
    status = f"HTTP/1.1 {wire.status} {HTTPStatus(wire.status).phrase}\r\n".encode("ascii")
    return b"".join([status, *(name + b": " + value + b"\r\n" for name, value in fields), b"\r\n", body])
