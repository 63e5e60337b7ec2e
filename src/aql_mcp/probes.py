"""Liveness and readiness (corporate §16): JSON, no auth, statuses only, never error details."""

from __future__ import annotations

import time

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from aql_mcp import __version__
from aql_mcp.store.base import Store


class Probes:
    def __init__(self, store: Store) -> None:
        self._store = store
        self._started = time.monotonic()
        self.draining = False

    async def health(self, request: Request) -> Response:
        return JSONResponse({"status": "ok", "version": __version__, "uptime": int(time.monotonic() - self._started)})

    async def ready(self, request: Request) -> Response:
        checks = {"store": "ok" if await self._store.is_ready() else "unavailable"}
        ready = all(v == "ok" for v in checks.values()) and not self.draining
        return JSONResponse(
            {"status": "ready" if ready else "not_ready", "checks": checks}, status_code=200 if ready else 503
        )
