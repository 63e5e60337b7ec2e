"""The development login (`/console/login`, development mode only; docs/console.md, "Signing in").

Outside development mode these routes do not exist (404): operators come through the gateway,
which injects their bearer token. Here a form asks for an operator name and the sign-in code the
service made at start (passcode.py: on its terminal and in its state directory, so only whoever runs
the service can sign in), and signs the browser in with a token minted by the development issuer for
that name, holding `auth.operator_scope`, kept in the HttpOnly, SameSite=Strict console cookie
(session.py). The token's audience is the console's own (`console_audience`), which `/mcp` refuses:
a console sign-in is not a credential for the MCP endpoint. The form is protected by a double submit
(the login cookie's one-time value must come back in the form) and the Fetch Metadata check.
"""

from __future__ import annotations

import re
from html import escape
from pathlib import Path

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from aql_mcp.plugin import AuditLog, DevIssuer, InvalidRequest, WireError, subject_digest
from aql_mcp.plugins.safety.console.csrf import FIELD, check_csrf, csrf_token
from aql_mcp.plugins.safety.console.document import page_response
from aql_mcp.plugins.safety.console.form import read_form, required
from aql_mcp.plugins.safety.console.guard import operator_of
from aql_mcp.plugins.safety.console.passcode import code_matches, new_code
from aql_mcp.plugins.safety.console.refusal import LoginCodeRefused, refusal
from aql_mcp.plugins.safety.console.session import (
    LOGIN_COOKIE,
    LOGIN_PATH,
    cleared_session_cookie,
    cookie_header,
    login_cookie,
    login_nonce,
    new_login_nonce,
    session_cookie,
)
from aql_mcp.plugins.safety.console.signout import SignOuts

OPERATOR_NAME = re.compile(r"^[A-Za-z0-9._@-]{1,64}$")
CODE_FIELD = "code"


def console_audience(audience: str) -> str:
    """The audience of the development login's tokens: the console guard's alone, never `/mcp`'s."""
    return audience + "#console"


class DevLogin:
    def __init__(
        self,
        issuer: DevIssuer,
        *,
        state_dir: Path,
        scope: str,
        max_age: int,
        secure: bool,
        audit: AuditLog,
        service: str,
        sign_outs: SignOuts,
    ) -> None:
        self.issuer = issuer
        self.sign_outs = sign_outs
        self.state_dir = state_dir
        new_code(state_dir)
        self.scope = scope
        self.max_age = max_age
        self.secure = secure
        self.audit = audit
        self.service = service

    async def form(self, request: Request) -> Response:
        nonce = new_login_nonce()
        body = (
            f"<main><h1>Operator console: sign in</h1>"
            f"<p>Development mode of <strong>{escape(self.service)}</strong>: signing in gives this browser a "
            f"token from the development issuer holding the operator scope <code>{escape(self.scope)}</code>. "
            "The sign-in code is on the terminal that started the service (and in the file "
            "<code>console-login-code</code> of its state directory). "
            "In production, the gateway in front of the service signs operators in.</p>"
            f'<form method=post action="{LOGIN_PATH}"><input type=hidden name={FIELD} value="{nonce}">'
            "<label for=operator>Operator name</label> "
            "<input type=text id=operator name=operator value=operator required maxlength=64 "
            'pattern="[A-Za-z0-9._@\\-]+" autocomplete=username> '
            f"<label for={CODE_FIELD}>Sign-in code</label> "
            f"<input type=password id={CODE_FIELD} name={CODE_FIELD} required maxlength=64 autocomplete=off> "
            "<button type=submit>Sign in</button></form></main>"
        )
        cookie = login_cookie(nonce, secure=self.secure)
        return page_response("Console: sign in", body, headers={"set-cookie": cookie})

    async def login(self, request: Request) -> Response:
        try:
            form = await read_form(request)
            check_csrf(request, form.get(FIELD), login_nonce(request) or "")
            name = required(form, "operator")
            if not OPERATOR_NAME.fullmatch(name):
                raise InvalidRequest("Invalid request: an operator name is 1-64 letters, digits or ._@-")
            if not code_matches(self.state_dir, required(form, CODE_FIELD)):
                raise LoginCodeRefused()
        except WireError as exc:
            await self.audit.record(
                "console_login", operation="login", principal="-", outcome="refused", code=type(exc).__name__
            )
            return refusal(request, exc)
        audience = console_audience(self.issuer.audience)
        token = self.issuer.mint(subject=name, scopes=[self.scope], ttl=self.max_age, audience=audience)
        response = RedirectResponse("/console", status_code=303)
        for cookie in (session_cookie(token, max_age=self.max_age, secure=self.secure), self._spent_login_cookie()):
            response.raw_headers.append((b"set-cookie", cookie.encode("latin-1")))
        await self.audit.record("console_login", operation="login", principal=subject_digest(name), outcome="ok")
        return response

    async def logout(self, request: Request) -> Response:
        operator = operator_of(request)
        try:
            form = await read_form(request)
            check_csrf(request, form.get(FIELD), csrf_token(operator.credential))
        except WireError as exc:
            return refusal(request, exc)
        # Revoked before the cookie is dropped: a copy of it, or a stream it opened, ends too.
        await self.sign_outs.sign_out(operator.credential, operator.principal.expires_at)
        await self.audit.record("console_logout", operation="logout", principal=operator.principal.digest, outcome="ok")
        response = RedirectResponse(LOGIN_PATH, status_code=303)
        response.headers["set-cookie"] = cleared_session_cookie(secure=self.secure)
        return response

    def _spent_login_cookie(self) -> str:
        return cookie_header(LOGIN_COOKIE, "", path=LOGIN_PATH, max_age=0, secure=self.secure)
