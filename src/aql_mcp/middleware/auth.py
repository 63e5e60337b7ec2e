"""Bearer authentication on the MCP endpoint (corporate §7, Appendix A).

Missing token: 401 with `WWW-Authenticate: Bearer realm=..., resource_metadata=...`; invalid or
expired: 401 with `error="invalid_token"`. Only the Authorization header is read: a token in
the query string is never accepted (corporate §7.1).
"""

from __future__ import annotations

import structlog
from starlette.types import ASGIApp, Receive, Scope, Send

from aql_mcp.auth.tokens import TokenVerifier
from aql_mcp.exceptions import AuthError, InvalidToken, MissingToken
from aql_mcp.responses import send_error
from aql_mcp.scope import PRINCIPAL_KEY, header, request_id_of

log = structlog.get_logger("aql_mcp.auth")


class AuthMiddleware:
    def __init__(self, app: ASGIApp, *, verifier: TokenVerifier, realm: str, resource_metadata: str) -> None:
        self.app = app
        self.verifier = verifier
        self.challenge = f'Bearer realm="{realm}", resource_metadata="{resource_metadata}"'

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            scope[PRINCIPAL_KEY] = self.verifier.verify(_bearer(header(scope, b"authorization")))
        except AuthError as exc:
            # The reason is logged, never the token (corporate §15.2).
            log.info("auth_failed", reason=exc.reason, request_id=request_id_of(scope))
            exc.headers["www-authenticate"] = self.challenge + (
                f', error="{exc.reason}"' if isinstance(exc, InvalidToken) else ""
            )
            await send_error(send, exc, request_id=request_id_of(scope))
            return
        await self.app(scope, receive, send)


def _bearer(value: str | None) -> str:
    if not value:
        raise MissingToken()
    scheme, _, token = value.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise InvalidToken()
    return token.strip()
