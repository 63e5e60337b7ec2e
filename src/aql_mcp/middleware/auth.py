"""Bearer authentication on the MCP endpoint (corporate §7, Appendix A; RFC 6750 §3).

Missing token: 401 with `WWW-Authenticate: Bearer realm=..., resource_metadata=...`; invalid or
expired: 401 adding `error="invalid_token"`; a token that may not use `/mcp` at all (lacks a
required scope, decided from the token alone before the body is read): 403 with
`error="insufficient_scope"`. Only the Authorization header is read: a token in the query string
is never accepted (corporate §7.1). When anonymous listing is on, a request without a token passes
with no principal and the endpoint decides which methods it may call; an `AuthError` it raises
comes back here to be answered with the same challenge.

A refusal of a modern (2026-07-28) request carries the request's own `id`, as every other modern
error does: the middleware reads the body it refuses, at most `PEEK_BYTES` of it and through the
body limits in front (a body larger, slower or unreadable is answered with `id: null`, as is every
legacy request). The era is the router's rule: the `MCP-Protocol-Version` header, or `_meta`'s
version when the header names none or a legacy one (docs/eras.md).
"""

from __future__ import annotations

from collections.abc import Callable

import structlog
from starlette.types import ASGIApp, Receive, Scope, Send

from aql_mcp.auth.principal import withheld_reason
from aql_mcp.auth.tokens import TokenVerifier, bearer_credential
from aql_mcp.exceptions import AuthError, InsufficientScope, InvalidToken, WireError
from aql_mcp.jsonrpc.messages import RequestId
from aql_mcp.jsonrpc.peek import HeldBody, meta_text, request_id
from aql_mcp.protocol.versions import META_VERSION, Era, era_of
from aql_mcp.responses import ResponseWatch, send_error
from aql_mcp.scope import MESSAGE_ID_KEY, PRINCIPAL_KEY, header, request_id_of

log = structlog.get_logger("aql_mcp.auth")
VERSION_HEADER = b"mcp-protocol-version"
# A request's id is looked for in a body this small at most: an unauthenticated caller never gets a
# large body parsed.
PEEK_BYTES = 64 * 1024
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
            await self._refuse(scope, send, exc, await modern_message_id(scope, receive))
            return
        watch = ResponseWatch(send)
        try:
            await self.app(scope, receive, watch)
        except AuthError as exc:
            if watch.started:
                raise
            await self._refuse(scope, send, exc, scope.get(MESSAGE_ID_KEY))

    async def _authenticate(self, scope: Scope) -> None:
        value = header(scope, b"authorization")
        if value is None and self.anonymous:
            return
        principal = await self.verifier.verify(bearer_credential(value))
        missing = tuple(sorted(self.required - principal.scopes))
        if missing:
            raise InsufficientScope(missing, withheld_reason(principal, missing))
        scope[PRINCIPAL_KEY] = principal

    async def _refuse(self, scope: Scope, send: Send, exc: WireError, message_id: RequestId | None) -> None:
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
        await send_error(send, exc, request_id=request_id_of(scope), message_id=message_id)


async def modern_message_id(scope: Scope, receive: Receive) -> RequestId | None:
    """The id of the modern JSON-RPC request a refusal answers; None for a legacy request, or a body
    over `PEEK_BYTES`, too slow or too large for the body limits, gone, or not a request."""
    if scope["method"] != "POST":
        return None
    try:
        body = await HeldBody(receive).read(limit=PEEK_BYTES)
    except WireError:
        return None  # the body limits refused it: the refusal stands, without the id
    if body is None:
        return None
    version = header(scope, VERSION_HEADER)
    if era_of(version) is Era.LEGACY and era_of(meta_text(body, META_VERSION)) is Era.LEGACY:
        return None
    return request_id(body)
