"""Request body limit (corporate §14: 1 MB by default): counted as it arrives, never read whole."""

from __future__ import annotations

from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from aql_mcp.exceptions import PayloadTooLarge
from aql_mcp.responses import send_error
from aql_mcp.scope import header, request_id_of


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp, *, max_bytes: int, on_refusal: Callable[[str], None] | None = None) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.on_refusal = on_refusal

    def _error(self) -> PayloadTooLarge:
        if self.on_refusal is not None:
            self.on_refusal("body")
        return PayloadTooLarge(data={"limit": "request_body", "maxBytes": self.max_bytes})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = header(scope, b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await send_error(send, self._error(), request_id=request_id_of(scope))
            return
        received = 0
        started = False

        async def counted_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise self._error()
            return message

        async def watch(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted_receive, watch)
        except PayloadTooLarge as exc:
            if started:
                raise
            await send_error(send, exc, request_id=request_id_of(scope))
