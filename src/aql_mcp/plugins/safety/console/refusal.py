"""How the console says no: one answer for every refusal (docs/console.md, "Errors").

A browser (`Accept: text/html`) gets a short HTML page with the status, what went wrong and a link
back; any other client gets the service's JSON error body (`error.code`, `error.message`,
`error.data.requestId`). Both carry the request id and the error's headers (`WWW-Authenticate`,
`Retry-After`). A safety-loop refusal from the operator desk (`OperationError`) keeps its MCP-AQL
code and gets the HTTP status that matches it. Nothing internal is shown: messages are written by
this service, never taken from a foreign exception.
"""

from __future__ import annotations

from html import escape
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from aql_mcp.plugin import (
    NOT_FOUND_RESOURCE,
    PERMISSION_DENIED,
    RATE_LIMIT_EXCEEDED,
    TOKEN_ALREADY_USED,
    TOKEN_EXPIRED,
    TOKEN_INVALID,
    Forbidden,
    OperationError,
    WireError,
    error_object,
    request_id_of,
)
from aql_mcp.plugins.safety.console.document import page_response

# The HTTP status of each operator-desk refusal; any other code is a 400.
DESK_STATUS = {
    NOT_FOUND_RESOURCE: 404,
    PERMISSION_DENIED: 403,
    TOKEN_ALREADY_USED: 409,
    TOKEN_EXPIRED: 410,
    TOKEN_INVALID: 422,
    RATE_LIMIT_EXCEEDED: 429,
}


class CsrfRefused(Forbidden):
    """A console POST without the CSRF token of its operator's credential, or from another site
    (docs/console.md); `data.reason` says which."""

    message = "Forbidden: the form's CSRF check failed; reload the console page and try again"

    def __init__(self, reason: str) -> None:
        super().__init__(data={"reason": reason})


class LoginCodeRefused(Forbidden):
    """The development login without the sign-in code the service wrote at start (docs/console.md)."""

    message = "Forbidden: the sign-in code is wrong; it is on the service's terminal and in its state directory"

    def __init__(self) -> None:
        super().__init__(data={"reason": "login_code"})


def refusal(request: Request, exc: WireError) -> Response:
    """The answer to a refused console request."""
    request_id = request_id_of(request.scope)
    wire, error = error_object(exc, request_id)
    return _answer(request, wire.status, error, wire.headers)


def desk_refusal(request: Request, exc: OperationError) -> Response:
    """The answer to an operator desk's refusal (a wrong code, a decided challenge, ...)."""
    status = DESK_STATUS.get(exc.code, 400)
    data: dict[str, Any] = {**(exc.details or {}), "requestId": request_id_of(request.scope)}
    headers = {}
    if exc.code == RATE_LIMIT_EXCEEDED and "retryAfterSeconds" in data:
        headers["retry-after"] = str(data["retryAfterSeconds"])
    return _answer(request, status, {"code": exc.code, "message": exc.message, "data": data}, headers)


def _answer(request: Request, status: int, error: dict[str, Any], headers: dict[str, str]) -> Response:
    if "text/html" not in request.headers.get("accept", ""):
        return JSONResponse({"error": error}, status_code=status, headers={**headers, "cache-control": "no-store"})
    body = (
        f"<main><h1>The console could not do that</h1>"
        f'<p class="notice error" role=alert>{escape(str(error["message"]))}</p>'
        f"<p>Status {status}, code <code>{escape(str(error['code']))}</code>, request id "
        f"<code>{escape(str(error['data']['requestId']))}</code>.</p>"
        f'<p><a href="/console">Back to the console</a></p></main>'
    )
    return page_response("Console: refused", body, status=status, headers=headers)
