"""`Connection: close` on every answer while the replica drains (docs/connections.md, "Rolling restarts").

From SIGTERM until the replica stops accepting (`shutdown.drain_seconds`) it still serves, but a
gateway that keeps a pool of idle keep-alive connections to it would go on reusing them, and when
the drain ends the replica closes the idle ones: a request the gateway writes onto one in that
instant is lost, and a gateway never retries a POST it has sent. Answering `Connection: close`
(RFC 9110 §7.6.1) makes the gateway drop each pooled connection after its next answer, so by the
end of the drain the gateway holds no idle connection to the replica and reaches it, if at all,
on fresh connections, which are refused once it stops listening and so safely tried elsewhere.
uvicorn closes the connection after an answer that says so.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

CLOSE = (b"connection", b"close")


class DrainMiddleware:
    def __init__(self, app: ASGIApp, *, draining: Callable[[], bool]) -> None:
        self.app = app
        self._draining = draining

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        # Returns the next app's awaitable: a request keeps no frame here, only `send_closing` (host.py).
        if scope["type"] != "http":
            return self.app(scope, receive, send)

        async def send_closing(message: Message) -> None:
            # Asked when the answer starts, not when the request came: a call that began before
            # SIGTERM and ends in the drain closes its connection too.
            if message["type"] == "http.response.start" and self._draining():
                headers = [(name, value) for name, value in message.get("headers", ()) if name.lower() != b"connection"]
                message["headers"] = [*headers, CLOSE]
            await send(message)

        return self.app(scope, receive, send_closing)
