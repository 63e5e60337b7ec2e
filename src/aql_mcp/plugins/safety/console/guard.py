"""Who may use the console: authenticated as `/mcp` is, holding the operator scope (docs/console.md).

Route middleware on every console route but the development login. The credential is the
`Authorization: Bearer` header (a gateway injects it) or, in development mode only, the login
cookie. The header is verified by the service's token verifier (JWKS, opaque, development issuer).
No credential: 401 with the same `WWW-Authenticate` challenge as `/mcp` (RFC 6750 §3), except that a
browser asking for the page in development mode is sent to the login page (303). An invalid token:
401 `error="invalid_token"`. A valid token without `auth.operator_scope`: 403
`error="insufficient_scope"`. The development login's cookie holds a token for the console's own
audience, checked by `cookie_verifier` (the development issuer's key, that audience): `/mcp`'s
verifier refuses it. A token signed out (signout.py) is refused as an invalid one, on every
replica that shares the store. The reason is logged with the request id, never the token (corporate §7.4,
§15.2).
"""

from __future__ import annotations

from dataclasses import dataclass

import structlog
from starlette.requests import Request
from starlette.responses import RedirectResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from aql_mcp.plugin import (
    PRINCIPAL_KEY,
    AuthError,
    InsufficientScope,
    InvalidToken,
    MissingToken,
    Principal,
    TokenVerifier,
    WireError,
    bearer_credential,
    request_id_of,
)
from aql_mcp.plugins.safety.console.refusal import refusal
from aql_mcp.plugins.safety.console.session import LOGIN_PATH, session_token
from aql_mcp.plugins.safety.console.signout import SignOuts

OPERATOR_KEY = "aql_mcp.console.operator"
log = structlog.get_logger("aql_mcp.console")


@dataclass(frozen=True, slots=True)
class Operator:
    """A signed-in operator: the verified principal and the credential it came with (the CSRF
    token is bound to it). `from_cookie` says the development login made it."""

    principal: Principal
    credential: str
    from_cookie: bool
    # The verifier that accepted the credential: the live stream asks it again on every tick.
    verifier: TokenVerifier


def operator_of(request: Request) -> Operator:
    operator = request.scope.get(OPERATOR_KEY)
    if not isinstance(operator, Operator):
        raise RuntimeError("a console endpoint was reached without ConsoleGuard in front of it")
    return operator


class ConsoleGuard:
    def __init__(
        self,
        app: ASGIApp,
        *,
        verifier: TokenVerifier,
        scope: str,
        challenge: str,
        sign_outs: SignOuts,
        cookie_verifier: TokenVerifier | None = None,
    ) -> None:
        self.app = app
        self.sign_outs = sign_outs
        self.verifier = verifier
        self.cookie_verifier = cookie_verifier
        self.scope = scope
        self.challenge = challenge
        self.dev = cookie_verifier is not None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        try:
            operator = await self._authenticate(request)
        except WireError as exc:
            await self._refuse(request, exc)(scope, receive, send)
            return
        scope[PRINCIPAL_KEY] = operator.principal
        scope[OPERATOR_KEY] = operator
        await self.app(scope, receive, send)

    async def _authenticate(self, request: Request) -> Operator:
        header = request.headers.get("authorization")
        cookie = session_token(request) if self.cookie_verifier is not None else None
        if header is not None:
            credential, verifier = bearer_credential(header), self.verifier
        elif cookie is not None and self.cookie_verifier is not None:
            credential, verifier = cookie, self.cookie_verifier
        else:
            raise MissingToken()
        principal = await verifier.verify(credential)
        if await self.sign_outs.is_signed_out(credential):
            raise InvalidToken()
        if self.scope not in principal.scopes:
            raise InsufficientScope((self.scope,))
        return Operator(principal, credential, verifier is not self.verifier, verifier)

    def _refuse(self, request: Request, exc: WireError) -> ASGIApp:
        request_id = request_id_of(request.scope)
        if isinstance(exc, MissingToken) and self.dev and _wants_page(request):
            return RedirectResponse(LOGIN_PATH, status_code=303)
        if isinstance(exc, InsufficientScope):
            log.info("console_auth_failed", reason="insufficient_scope", request_id=request_id)
            exc.headers["www-authenticate"] = f'{self.challenge}, error="insufficient_scope", scope="{self.scope}"'
        elif isinstance(exc, AuthError):
            log.info("console_auth_failed", reason=exc.reason, request_id=request_id)
            suffix = f', error="{exc.reason}"' if isinstance(exc, InvalidToken) else ""
            exc.headers["www-authenticate"] = self.challenge + suffix
        return refusal(request, exc)


def _wants_page(request: Request) -> bool:
    return request.method == "GET" and "text/html" in request.headers.get("accept", "")
