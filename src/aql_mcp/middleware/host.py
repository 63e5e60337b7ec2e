"""Host allow-list, the second half of the DNS-rebinding defence (2025-11-25 transports).

Route middleware on the MCP endpoint and the service page only: health probes reach the pod by
its IP, so the probes are never subject to it. A refused Host is 421 Misdirected Request.
An entry without a port accepts that name on any port (the gateway may or may not add `:443`);
an entry with a port accepts only that port.
"""

from __future__ import annotations

from collections.abc import Awaitable, Iterable

from starlette.types import ASGIApp, Receive, Scope, Send

from aql_mcp.exceptions import HostNotAllowed
from aql_mcp.responses import send_error
from aql_mcp.scope import header, request_id_of


class HostMiddleware:
    def __init__(self, app: ASGIApp, *, allowed_hosts: Iterable[str]) -> None:
        self.app = app
        self.allowed = frozenset(h.lower() for h in allowed_hosts)

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        # Returns the next app's awaitable instead of awaiting it: a request let through keeps no
        # frame here while it runs, which an open stream does for hours (docs/connections.md).
        if scope["type"] != "http" or not self.allowed:
            return self.app(scope, receive, send)
        host = (header(scope, b"host") or "").lower()
        if host not in self.allowed and _name(host) not in self.allowed:
            return send_error(send, HostNotAllowed(), request_id=request_id_of(scope))
        return self.app(scope, receive, send)


def _name(host: str) -> str:
    """The host name without its port (`[::1]:8000` -> `[::1]`)."""
    if host.startswith("["):
        return host.partition("]")[0] + "]"
    return host.rpartition(":")[0] if host.count(":") == 1 else host
