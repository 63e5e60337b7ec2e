"""Origin allow-list and CORS (2025-11-25 transports, "Security Warning"; corporate §6).

A present `Origin` must equal an allowed origin as a parsed (scheme, host, port) triple: no
regex, no prefix, no suffix, so `https://good.example.evil.test` never passes for
`https://good.example`. A refused origin is 403; allowed ones get CORS headers, and their
preflights are answered here. The `Mcp-Param-*` names a preflight asks for are allowed as asked:
they differ per tool (2026-07-28 Streamable HTTP, "Custom Headers from Tool Parameters") and the
modern edge checks each declared one against the body anyway (docs/eras.md).

A refusal is logged at info, as the other refusals of a request are (`auth_failed`,
`rate_limited`), with why: `null` (an opaque origin: a sandboxed frame, a file: page),
`malformed` (not scheme://host[:port]), `no_allow_list` (none configured, so every browser origin
is refused) or `not_allowed`; the refused origin itself only when it parsed, normalised and cut
short, so the operator can add it to `http.allowed_origins` if it is theirs. An origin is public
(the browser sends it to every site), so the line holds nothing secret.
"""

from __future__ import annotations

from collections.abc import Awaitable, Iterable
from urllib.parse import urlsplit

import structlog
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from aql_mcp.exceptions import OriginNotAllowed
from aql_mcp.protocol.param_headers import requested_param_headers
from aql_mcp.responses import send_empty, send_error
from aql_mcp.scope import header, request_id_of

ALLOW_METHODS = b"GET, POST, DELETE, OPTIONS"
ALLOW_HEADERS = (
    b"authorization, content-type, accept, mcp-session-id, mcp-protocol-version, last-event-id, "
    b"x-request-id, traceparent, tracestate, mcp-method, mcp-name"
)
EXPOSE_HEADERS = b"mcp-session-id, mcp-protocol-version, x-request-id"
DEFAULT_PORTS = {"http": 80, "https": 443}
# The longest refused origin a log line repeats (a host name is at most 253 characters).
LOGGED_ORIGIN_CHARS = 300

log = structlog.get_logger("aql_mcp.http")

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
        return self.refusal(origin) is None

    def refusal(self, origin: str) -> str | None:
        """Why `origin` may not call (`null`, `malformed`, `no_allow_list`, `not_allowed`), or None."""
        if self.any:
            return None
        if origin.strip().lower() == "null":
            return "null"
        parsed = parse_origin(origin)
        if parsed is None:
            return "malformed"
        if parsed in self.origins:
            return None
        return "not_allowed" if self.origins else "no_allow_list"


def _shown(origin: str, reason: str) -> str | None:
    """The refused origin as the log shows it: normalised when it parsed, else not at all."""
    parsed = parse_origin(origin) if reason in ("not_allowed", "no_allow_list") else None
    if parsed is None:
        return None
    scheme, host, port = parsed
    return f"{scheme}://{host}:{port}"[:LOGGED_ORIGIN_CHARS]


def allowed_headers(scope: Scope) -> bytes:
    """The fixed request headers, and the `Mcp-Param-*` ones this preflight names."""
    extra = requested_param_headers(header(scope, b"access-control-request-headers"))
    return b", ".join([ALLOW_HEADERS, *(name.encode("ascii") for name in extra)])


class OriginMiddleware:
    def __init__(self, app: ASGIApp, *, allowed_origins: Iterable[str]) -> None:
        self.app = app
        self.policy = OriginPolicy(allowed_origins)

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        # Returns the next app's awaitable: a request let through keeps no frame here (host.py).
        if scope["type"] != "http":
            return self.app(scope, receive, send)
        origin = header(scope, b"origin")
        if origin is None:
            return self.app(scope, receive, send)
        reason = self.policy.refusal(origin)
        if reason is not None:
            request_id = request_id_of(scope)
            log.info("origin_refused", reason=reason, origin=_shown(origin, reason), request_id=request_id)
            return send_error(send, OriginNotAllowed(), request_id=request_id)
        cors = [(b"access-control-allow-origin", origin.encode("latin-1")), (b"vary", b"Origin")]
        if scope["method"] == "OPTIONS" and header(scope, b"access-control-request-method"):
            return send_empty(
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

        async def send_with_cors(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [
                    *message.get("headers", ()),
                    *cors,
                    (b"access-control-expose-headers", EXPOSE_HEADERS),
                ]
            await send(message)

        return self.app(scope, receive, send_with_cors)
