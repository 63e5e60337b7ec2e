"""The outermost layer: an unexpected exception becomes a JSON 500, never a stack trace."""

from __future__ import annotations

import structlog
from starlette.types import ASGIApp, Receive, Scope, Send

from aql_mcp.exceptions import InternalError
from aql_mcp.responses import ResponseWatch, send_error
from aql_mcp.scope import request_id_of

log = structlog.get_logger("aql_mcp.errors")


class ServerErrorMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        watch = ResponseWatch(send)
        try:
            await self.app(scope, receive, watch)
        except Exception as exc:
            # Full context goes to the internal log only, tied to the request id (corporate §15.2).
            log.error("unhandled_exception", request_id=request_id_of(scope), path=scope["path"], exc_info=exc)
            if not watch.started:
                await send_error(send, InternalError(), request_id=request_id_of(scope))
