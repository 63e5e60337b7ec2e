"""Bearer authentication on the MCP endpoint (corporate §7, Appendix A; RFC 6750 §3).

Missing token: 401 with `WWW-Authenticate: Bearer realm=..., resource_metadata=...`; invalid or
expired: 401 adding `error="invalid_token"`; a token that may not use `/mcp` at all (lacks a
required scope, decided from the token alone before the body is read): 403 with
`error="insufficient_scope"`. Only the Authorization header is read: a token in the query string
is never accepted (corporate §7.1). When anonymous listing is on, a request without a token passes
with no principal and the endpoint decides which methods it may call; an `AuthError` it raises
comes back here to be answered with the same challenge.
"""

from __future__ import annotations

from collections.abc import Callable

import structlog
from starlette.types import ASGIApp, Receive, Scope, Send

from aql_mcp.auth.principal import withheld_reason
from aql_mcp.auth.tokens import TokenVerifier, bearer_credential
from aql_mcp.exceptions import AuthError, InsufficientScope, InvalidToken, WireError
from aql_mcp.responses import ResponseWatch, send_error
from aql_mcp.scope import PRINCIPAL_KEY, header, request_id_of

log = structlog.get_logger("aql_mcp.auth")
# RFC 6750 §3 `error_description`: why a token that carries the scope still lacks it (auth.delegation).
DELEGATION_DESCRIPTIONS = {
    "refused": ', error_description="a delegated token (act) may not use this scope"',
    "required": ', error_description="only a delegated token (act) may use this scope"',
}


class AuthMiddleware:
    def __init__(
        self,
        app: ASGIApp,
        *,
        verifier: TokenVerifier,
        realm: str,
        resource_metadata: str,
        required_scopes: tuple[str, ...] = (),
        anonymous: bool = False,
        on_failure: Callable[[str], None] | None = None,
    ) -> None:
        self.app = app
        self.on_failure = on_failure
        self.verifier = verifier
        self.challenge = f'Bearer realm="{realm}", resource_metadata="{resource_metadata}"'
        self.required = frozenset(required_scopes)
        self.anonymous = anonymous

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            await self._authenticate(scope)
        except WireError as exc:
            await self._refuse(scope, send, exc)
            return
        watch = ResponseWatch(send)
        try:
            await self.app(scope, receive, watch)
        except AuthError as exc:
            if watch.started:
                raise
            await self._refuse(scope, send, exc)

    async def _authenticate(self, scope: Scope) -> None:
        value = header(scope, b"authorization")
        if value is None and self.anonymous:
            return
        principal = await self.verifier.verify(bearer_credential(value))
        missing = tuple(sorted(self.required - principal.scopes))
        if missing:
            raise InsufficientScope(missing, withheld_reason(principal, missing))
        scope[PRINCIPAL_KEY] = principal

    async def _refuse(self, scope: Scope, send: Send, exc: WireError) -> None:
        if self.on_failure is not None:
            reason = exc.reason if isinstance(exc, AuthError) else "insufficient_scope"
            self.on_failure(reason if isinstance(exc, AuthError | InsufficientScope) else "unavailable")
        if isinstance(exc, InsufficientScope):
            exc.headers["www-authenticate"] = (
                f'{self.challenge}, error="insufficient_scope", scope="{" ".join(exc.missing)}"'
                + DELEGATION_DESCRIPTIONS.get(exc.delegation or "", "")
            )
            log.info("auth_failed", reason="insufficient_scope", request_id=request_id_of(scope))
        elif isinstance(exc, AuthError):
            # The reason is logged, never the token (corporate §15.2).
            log.info("auth_failed", reason=exc.reason, request_id=request_id_of(scope))
            suffix = f', error="{exc.reason}"' if isinstance(exc, InvalidToken) else ""
            exc.headers["www-authenticate"] = self.challenge + suffix
        await send_error(send, exc, request_id=request_id_of(scope))
