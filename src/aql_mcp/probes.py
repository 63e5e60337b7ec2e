"""Liveness and readiness (corporate §16): JSON, no auth, statuses only, never error details."""

from __future__ import annotations

import time

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from aql_mcp import __version__
from aql_mcp.auth.jwks import JwksKeySource
from aql_mcp.store.base import Store


class Probes:
    """`/ready` means: the store answers and a usable key set is held. A failed key refresh while
    the last good set is still usable is `degraded` but ready, so a brief IdP outage does not take
    every replica out of the load balancer."""

    def __init__(self, store: Store, jwks: JwksKeySource | None = None) -> None:
        self._store = store
        self._jwks = jwks
        self._started = time.monotonic()
        self.draining = False

    async def health(self, request: Request) -> Response:
        return JSONResponse({"status": "ok", "version": __version__, "uptime": int(time.monotonic() - self._started)})

    async def ready(self, request: Request) -> Response:
        checks = {"store": "ok" if await self._store.is_ready() else "unavailable"}
        if self._jwks is not None:
            checks["jwks"] = self._jwks.status()
        ready = "unavailable" not in checks.values() and not self.draining
        return JSONResponse(
            {"status": "ready" if ready else "not_ready", "checks": checks}, status_code=200 if ready else 503
        )
