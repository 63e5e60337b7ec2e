"""Origin allow-list and CORS (2025-11-25 transports, "Security Warning"; corporate §6).

A present `Origin` must equal an allowed origin as a parsed (scheme, host, port) triple: no
regex, no prefix, no suffix, so `https://good.example.evil.test` never passes for
`https://good.example`. A refused origin is 403; allowed ones get CORS headers, and their
preflights are answered here. The `Mcp-Param-*` names a preflight asks for are allowed as asked:
they differ per tool (2026-07-28 Streamable HTTP, "Custom Headers from Tool Parameters") and the
modern edge checks each declared one against the body anyway (docs/eras.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from aql_mcp.exceptions import OriginNotAllowed
from aql_mcp.param_headers import requested_param_headers
from aql_mcp.responses import send_empty, send_error
from aql_mcp.scope import header, request_id_of

ALLOW_METHODS = b"GET, POST, DELETE, OPTIONS"
ALLOW_HEADERS = (
    b"authorization, content-type, accept, mcp-session-id, mcp-protocol-version, last-event-id, "
    b"x-request-id, traceparent, tracestate, mcp-method, mcp-name"
)
EXPOSE_HEADERS = b"mcp-session-id, mcp-protocol-version, x-request-id"
DEFAULT_PORTS = {"http": 80, "https": 443}

Origin = tuple[str, str, int]


def parse_origin(value: str) -> Origin | None:
    """(scheme, host, port) of an origin, or None when it is not one (e.g. `null`)."""
    try:
        parts = urlsplit(value.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.hostname or parts.path not in ("", "/") or parts.query:
        return None
    if parts.username is not None or parts.password is not None:
        return None
    return scheme, parts.hostname.lower(), port if port is not None else DEFAULT_PORTS[scheme]


class OriginPolicy:
    """Which origins may call; `*` (development mode only) lets any through."""

    def __init__(self, allowed: Iterable[str]) -> None:
        allowed = tuple(allowed)
        self.any = "*" in allowed
        self.origins = {o for o in (parse_origin(a) for a in allowed if a != "*") if o is not None}

    def is_allowed(self, origin: str) -> bool:
        if self.any:
            return True
        parsed = parse_origin(origin)
        return parsed is not None and parsed in self.origins


def allowed_headers(scope: Scope) -> bytes:
    """The fixed request headers, and the `Mcp-Param-*` ones this preflight names."""
    extra = requested_param_headers(header(scope, b"access-control-request-headers"))
    return b", ".join([ALLOW_HEADERS, *(name.encode("ascii") for name in extra)])


class OriginMiddleware:
    def __init__(self, app: ASGIApp, *, allowed_origins: Iterable[str]) -> None:
        self.app = app
        self.policy = OriginPolicy(allowed_origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        origin = header(scope, b"origin")
        if origin is None:
            await self.app(scope, receive, send)
            return
        if not self.policy.is_allowed(origin):
            await send_error(send, OriginNotAllowed(), request_id=request_id_of(scope))
            return
        cors = [(b"access-control-allow-origin", origin.encode("latin-1")), (b"vary", b"Origin")]
        if scope["method"] == "OPTIONS" and header(scope, b"access-control-request-method"):
            await send_empty(
                send,
                204,
                [
                    *cors,
                    (b"access-control-allow-methods", ALLOW_METHODS),
                    (b"access-control-allow-headers", allowed_headers(scope)),
                    (b"vary", b"Access-Control-Request-Headers"),
                    (b"access-control-max-age", b"600"),
                ],
            )
            return

        async def send_with_cors(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [
                    *message.get("headers", ()),
                    *cors,
                    (b"access-control-expose-headers", EXPOSE_HEADERS),
                ]
            await send(message)

        await self.app(scope, receive, send_with_cors)
