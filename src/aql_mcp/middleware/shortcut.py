"""`/mcp` straight from the global middleware to its own guards and the era router, past
Starlette's exception middleware, router and route (docs/connections.md, "What an open stream costs").

Every frame between uvicorn and the endpoint stays in memory as long as its request runs, and a
stream runs for hours: Starlette's `ExceptionMiddleware`, `Router` and `Route` add five frames and
three closures, about 2 KiB, to each. `/mcp` uses none of them: it matches one exact path, takes
every method (the edges answer 405 themselves), and raises no `HTTPException` (handlers raise the
service's own errors, which the middleware and edges answer). Every other path, and anything but
HTTP, goes on through Starlette's router as before; the service sets no `root_path`.
"""

from __future__ import annotations

from collections.abc import Awaitable

from starlette.types import ASGIApp, Receive, Scope, Send


class McpShortcut:
    def __init__(self, app: ASGIApp, *, path: str, endpoint: ASGIApp) -> None:
        self.app = app
        self.path = path
        self.endpoint = endpoint

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        # Returns the next app's awaitable: no frame of its own either (host.py).
        if scope["type"] == "http" and scope["path"] == self.path:
            return self.endpoint(scope, receive, send)
        return self.app(scope, receive, send)
