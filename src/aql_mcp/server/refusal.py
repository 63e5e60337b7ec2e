"""A connection's refusal, the answer it writes before any ASGI work (server/connection.py): the
errors for a head or a message past its limit, the JSON-RPC answer from the one encoder
(`responses.error_object`) with a request id of its own, and the half-close that lets the client
read it instead of a reset (RFC 9293 §3.6.1)."""

from __future__ import annotations

import asyncio

import structlog

from aql_mcp.exceptions import HeadersTooLarge, PayloadTooLarge, WireError
from aql_mcp.middleware.request_id import REQUEST_ID_HEADER, new_request_id
from aql_mcp.responses import error_response
from aql_mcp.server.connection_limits import FLOOD_REFUSALS, ConnectionLimits

# The connection's logger: a refusal is told of as the connection's event.
log = structlog.get_logger("aql_mcp.connection")


def headers_too_large(limits: ConnectionLimits) -> HeadersTooLarge:
    """431: the request line and headers passed `http.max_header_bytes` or `http.max_headers`."""
    return HeadersTooLarge(
        data={"limit": "request_headers", "maxBytes": limits.max_header_bytes, "maxHeaders": limits.max_headers}
    )


def message_too_large(limits: ConnectionLimits) -> PayloadTooLarge:
    """413: the bytes of a message after its head passed `max_message_bytes`."""
    return PayloadTooLarge(data={"limit": "request_body", "maxBytes": limits.max_message_bytes})


def kind_of(refusal: WireError | None) -> str:
    """The refusal's kind for the metric, for a parser error: a head too large or a malformed one."""
    return "headers" if isinstance(refusal, HeadersTooLarge) else "malformed"


def write_refusal(
    transport: asyncio.Transport, error: WireError, kind: str, default_headers: list[tuple[bytes, bytes]]
) -> None:
    """Write the refusal's answer; a flood's kinds are counted, not logged one by one."""
    if kind not in FLOOD_REFUSALS:
        log.info("connection_refused", reason=kind, status=error.status)
    request_id = new_request_id()
    headers = [*default_headers, (REQUEST_ID_HEADER, request_id.encode("ascii"))]
    transport.write(error_response(error, request_id=request_id, headers=headers))


def half_close(transport: asyncio.Transport, *, lingering: int, max_lingering: int) -> bool:
    """Half-close after the answer, and say whether the connection lingers (reading and dropping what
    still arrives) or, in a flood of refusals past `max_lingering`, was closed at once: the risk of a
    reset rather than more descriptors held beyond the cap."""
    if lingering >= max_lingering:
        transport.close()
        return False
    if transport.can_write_eof():
        transport.write_eof()
    return True
