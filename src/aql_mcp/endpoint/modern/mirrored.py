"""The standard headers a modern request mirrors from its body (2026-07-28 Streamable HTTP,
"Standard Request Headers"): `MCP-Protocol-Version`, `Mcp-Method` and, for the methods that name
something, `Mcp-Name`. Gateways route on them without reading the body, so the endpoint refuses a
request whose headers and body disagree. The tools' own `Mcp-Param-*` headers are checked in
protocol/param_headers.py.
"""

from __future__ import annotations

from starlette.types import Scope

from aql_mcp.exceptions import HeaderMismatch
from aql_mcp.jsonrpc.messages import Request
from aql_mcp.protocol.param_headers import decode_header_value
from aql_mcp.scope import header

VERSION_HEADER = b"mcp-protocol-version"
METHOD_HEADER = b"mcp-method"
NAME_HEADER = b"mcp-name"
# Which body field `Mcp-Name` mirrors (2026-07-28 Streamable HTTP, "Standard Request Headers").
# SEP-2663 ("Routing Headers") adds the task methods, whose name is the task id.
NAMED = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    "tasks/get": "taskId",
    "tasks/update": "taskId",
    "tasks/cancel": "taskId",
}


def check_mirrored(scope: Scope, request: Request, version: str) -> None:
    """-32020 unless the mirrored headers are present and equal the body (2026-07-28 Streamable
    HTTP, "Server Validation"); values compare case-sensitively, and `Mcp-Name` may carry the
    Base64 sentinel form."""
    if _value(scope, VERSION_HEADER) != version:
        raise HeaderMismatch(data={"header": "MCP-Protocol-Version"})
    if _value(scope, METHOD_HEADER) != request.method:
        raise HeaderMismatch(data={"header": "Mcp-Method"})
    field = NAMED.get(request.method)
    if field is None:
        return
    value = request.params.get(field)
    sent = _value(scope, NAME_HEADER)
    if sent is None or not isinstance(value, str) or decode_header_value(sent) != value:
        raise HeaderMismatch(data={"header": "Mcp-Name"})


def _value(scope: Scope, name: bytes) -> str | None:
    """A header's value without the optional whitespace around it (RFC 9110 §5.5)."""
    value = header(scope, name)
    return value.strip(" \t") if value is not None else None
