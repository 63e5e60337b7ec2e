"""X-Request-Id: accepted when it is a safe token, minted otherwise, returned on every response.

The id is bound to the log context for the whole request (corporate §15.1), and one line per
HTTP request is logged here with the path but never the query string (which could hold a secret).
"""

from __future__ import annotations

import re
import time
import uuid

import structlog
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from aql_mcp.scope import REQUEST_ID_KEY, header

REQUEST_ID_HEADER = b"x-request-id"
SAFE_ID = re.compile(r"^[A-Za-z0-9._:@/+=-]{1,128}$")

log = structlog.get_logger("aql_mcp.http")


class RequestIdMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        offered = header(scope, REQUEST_ID_HEADER)
        request_id = offered if offered and SAFE_ID.match(offered) else uuid.uuid4().hex
        scope[REQUEST_ID_KEY] = request_id
        raw_id = request_id.encode("ascii")
        status = 0
        started = time.perf_counter()

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [*message.get("headers", ()), (REQUEST_ID_HEADER, raw_id)]
            await send(message)

        structlog.contextvars.bind_contextvars(request_id=request_id)
        try:
            await self.app(scope, receive, send_with_id)
        finally:
            log.info(
                "http_request",
                method=scope["method"],
                path=scope["path"],
                status=status,
                duration_ms=round((time.perf_counter() - started) * 1000, 2),
            )
            structlog.contextvars.unbind_contextvars("request_id")
