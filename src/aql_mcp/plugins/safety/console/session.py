"""The development login's cookies (docs/console.md, "Signing in").

In development mode `POST /console/login` stores an operator token minted by the development issuer
in a cookie: HttpOnly (no script reads it), SameSite=Strict (no other site's page sends it),
Path=/console (no other endpoint of the service sees it), Secure when the service's URL is https.
The login form itself carries a one-time value that must equal the login cookie's (double submit),
since there is no session yet to bind a CSRF token to. A token never travels in a query string and
is never logged (corporate §7.1, §15.2).
"""

from __future__ import annotations

import secrets

from starlette.requests import Request

SESSION_COOKIE = "aql_console"
LOGIN_COOKIE = "aql_console_login"
PATH = "/console"
LOGIN_PATH = "/console/login"
LOGIN_SECONDS = 600


def cookie_header(name: str, value: str, *, path: str, max_age: int, secure: bool) -> str:
    """A Set-Cookie value with the console's attributes; `max_age` 0 deletes the cookie."""
    parts = [f"{name}={value}", f"Path={path}", f"Max-Age={max_age}", "HttpOnly", "SameSite=Strict"]
    if secure:
        parts.append("Secure")
    return "; ".join(parts)


def session_cookie(token: str, *, max_age: int, secure: bool) -> str:
    return cookie_header(SESSION_COOKIE, token, path=PATH, max_age=max_age, secure=secure)


def cleared_session_cookie(*, secure: bool) -> str:
    return cookie_header(SESSION_COOKIE, "", path=PATH, max_age=0, secure=secure)


def new_login_nonce() -> str:
    return secrets.token_urlsafe(32)


def login_cookie(nonce: str, *, secure: bool) -> str:
    return cookie_header(LOGIN_COOKIE, nonce, path=LOGIN_PATH, max_age=LOGIN_SECONDS, secure=secure)


def session_token(request: Request) -> str | None:
    """The operator token of the development login, when the browser sent one."""
    return request.cookies.get(SESSION_COOKIE) or None


def login_nonce(request: Request) -> str | None:
    return request.cookies.get(LOGIN_COOKIE) or None
