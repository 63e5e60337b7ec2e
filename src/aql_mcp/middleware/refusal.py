"""A configuration refusal found while the service starts ends the start quietly.

The store is opened in the lifespan, inside uvicorn, so a store this release must not run on
(`SchemaTooNew`) is found there. Starlette answers any lifespan exception with
`lifespan.startup.failed` carrying the traceback, which uvicorn logs before it exits with its own
code. A configuration refusal is not a crash: the lifespan has logged it as one event, so this layer
sends the failure without the traceback and keeps the error for `serve`, which exits 2 as for any
other refused configuration.
"""

from __future__ import annotations

from collections.abc import Awaitable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from aql_mcp.exceptions import ConfigError


class Refusal:
    """The configuration error that stopped the start, if one did."""

    def __init__(self) -> None:
        self.error: ConfigError | None = None


class StartupRefusalMiddleware:
    def __init__(self, app: ASGIApp, *, refusal: Refusal) -> None:
        self.app = app
        self.refusal = refusal

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        # Returns the next app's awaitable: a request keeps no frame here (host.py).
        if scope["type"] != "lifespan":
            return self.app(scope, receive, send)
        return self._lifespan(scope, receive, send)

    async def _lifespan(self, scope: Scope, receive: Receive, send: Send) -> None:
        held: list[Message] = []

        async def hold_failure(message: Message) -> None:
            if message["type"] == "lifespan.startup.failed":
                held.append(message)  # sent once the exception says what failed
                return
            await send(message)

        try:
            await self.app(scope, receive, hold_failure)
        except ConfigError as exc:
            if not held:
                raise
            self.refusal.error = exc
            await send({"type": "lifespan.startup.failed", "message": ""})
            return
        finally:
            if held and self.refusal.error is None:
                await send(held[0])
