"""The HTTP status of a JSON-RPC error answering a dispatched request, per era (docs/eras.md).

Errors raised before dispatch (bad media type, no token, oversized body) always travel with their
own `WireError.status`, in both eras. Once a request has been dispatched:

- legacy (2025-11-25): the answer travels with 200, except errors whose status is the signal
  (`keeps_status`: 504, and 429 or 503 with Retry-After) (docs/errors.md);
- modern (2026-07-28): the protocol errors the Streamable HTTP binding names keep their status
  (400 for -32602, -32020, -32021, -32022; 404 for -32601), as do the `keeps_status` ones; an
  error of the call itself (a tool, resource or prompt failing) still travels with 200.

The modern era also renames one code: "resource not found" is -32602, never -32002
(2026-07-28 basic, "Error Codes"; server/resources, "Error Handling").
"""

from __future__ import annotations

from aql_mcp.exceptions import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MISSING_CLIENT_CAPABILITY,
    PARSE_ERROR,
    RESOURCE_NOT_FOUND,
    UNSUPPORTED_PROTOCOL_VERSION,
    WireError,
)
from aql_mcp.protocol.versions import Era

# Modern era: the codes whose HTTP status is part of the protocol.
MODERN_STATUS = {
    PARSE_ERROR: 400,
    INVALID_REQUEST: 400,
    INVALID_PARAMS: 400,
    HEADER_MISMATCH: 400,
    MISSING_CLIENT_CAPABILITY: 400,
    UNSUPPORTED_PROTOCOL_VERSION: 400,
    METHOD_NOT_FOUND: 404,
}
# Modern era: codes earlier revisions used that this one replaces (2026-07-28 MUST NOT emit them).
MODERN_CODES = {RESOURCE_NOT_FOUND: INVALID_PARAMS}


def dispatched_status(era: Era, wire: WireError, code: int) -> int:
    """The status of the HTTP response carrying `wire` (sent as `code`) for a dispatched request."""
    if wire.keeps_status:
        return wire.status
    if era is Era.MODERN:
        return MODERN_STATUS.get(code, 200)
    return 200


def wire_code(era: Era, code: int) -> int:
    """The JSON-RPC code `code` is sent as in `era`."""
    return MODERN_CODES.get(code, code) if era is Era.MODERN else code
