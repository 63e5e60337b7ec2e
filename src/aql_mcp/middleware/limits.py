"""Request body limits: size (corporate §14: 1 MB by default), counted as it arrives, never read
whole; and pace: once the app starts reading a body, all of it must arrive within
`http.body_timeout_seconds`, or the request is answered 408 and its connection closed.

The deadline runs from the app's first read, not from the request's start: uvicorn stops reading
the socket while a buffered body waits for the app, so a client cannot be blamed for that wait.
Once the body is complete, `receive` only reports a disconnect (an SSE stream watches it for as
long as the stream lasts) and runs without a deadline.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from aql_mcp.exceptions import PayloadTooLarge, RequestTimeout
from aql_mcp.responses import ResponseWatch, send_error
from aql_mcp.scope import header, request_id_of
from aql_mcp.timeouts import deadline_at


class BodyLimitMiddleware:
    def __init__(
        self,
        app: ASGIApp,
        *,
        max_bytes: int,
        timeout_seconds: float = math.inf,
        on_refusal: Callable[[str], None] | None = None,
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.timeout_seconds = timeout_seconds
        self.on_refusal = on_refusal

    def _refused(self, kind: str) -> None:
        if self.on_refusal is not None:
            self.on_refusal(kind)

    def _too_large(self) -> PayloadTooLarge:
        self._refused("body")
        return PayloadTooLarge(data={"limit": "request_body", "maxBytes": self.max_bytes})

    def _too_slow(self) -> RequestTimeout:
        self._refused("body_timeout")
        return RequestTimeout(data={"limit": "request_body", "seconds": self.timeout_seconds})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = header(scope, b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await send_error(send, self._too_large(), request_id=request_id_of(scope))
            return
        received = 0
        deadline: float | None = None
        complete = False

        async def policed_receive() -> Message:
            nonlocal received, deadline, complete
            if complete:
                return await receive()
            if deadline is None:
                deadline = asyncio.get_running_loop().time() + self.timeout_seconds
            try:
                # One timer per loop for every body's deadline, not one per read (aql_mcp/timeouts.py).
                async with deadline_at(deadline if deadline != math.inf else None):
                    message = await receive()
            except TimeoutError:
                raise self._too_slow() from None
            complete = message["type"] != "http.request" or not message.get("more_body", False)
            received += len(message.get("body", b""))
            if received > self.max_bytes:
                raise self._too_large()
            return message

        watch = ResponseWatch(send)
        try:
            await self.app(scope, policed_receive, watch)
        except (PayloadTooLarge, RequestTimeout) as exc:
            if watch.started:
                raise
            await send_error(send, exc, request_id=request_id_of(scope))
