"""Liveness and readiness (corporate §16): JSON, no auth, statuses only, never error details."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from aql_mcp import __version__
from aql_mcp.auth.jwks import JwksKeySource
from aql_mcp.store.base import Store

# How long one look at the store serves `/ready`: probes from the kubelet, the gateway and an
# operator's curl share it instead of each writing to the store.
STORE_CHECK_SECONDS = 1.0


class Probes:
    """`/ready` means: the store answers a read and commits a write, and a usable key set is held.
    With `audit.trail` off it says `audit_trail: off`, and stays ready (docs/audit.md).

    A failed key refresh while the last good set is still usable is `degraded` but ready, so a brief
    IdP outage does not take every replica out of the load balancer. A store that reads but cannot
    write (full disk, read-only file or database, a lock held elsewhere) is not ready: the replica
    leaves the rotation, while `/health` stays 200 so liveness does not restart it for what a
    restart cannot mend. The store's answer is kept `STORE_CHECK_SECONDS`; the write probe is one
    small upsert bounded by `store.base.PROBE_SECONDS`.

    With several issuers (`auth.issuers`) `jwks` sums up their key sets: `unavailable` only when none
    is usable, `degraded` when some but not all are, so one IdP's outage does not take the replicas
    that still serve the others' callers out of the load balancer (docs/identity.md).
    """

    def __init__(
        self,
        store: Store,
        key_sources: Sequence[JwksKeySource] = (),
        *,
        clock: Callable[[], float] = time.monotonic,
        on_store_check: Callable[..., None] | None = None,
        audit_trail: bool = True,
    ) -> None:
        self._store = store
        self._audit_trail = audit_trail
        self._on_store_check = on_store_check
        self._key_sources = tuple(key_sources)
        self._clock = clock
        self._started = clock()
        self._store_checks: dict[str, str] = {}
        self._checked_at = -STORE_CHECK_SECONDS
        self._checking = anyio.Lock()
        self.draining = False

    async def health(self, request: Request) -> Response:
        return JSONResponse({"status": "ok", "version": __version__, "uptime": int(self._clock() - self._started)})

    async def ready(self, request: Request) -> Response:
        checks = dict(await self._check_store())
        if self._key_sources:
            checks["jwks"] = key_status(self._key_sources)
        if not self._audit_trail:
            # Not a failure (the replica serves), but whoever looks must see no records are written.
            checks["audit_trail"] = "off"
        ready = "unavailable" not in checks.values() and not self.draining
        return JSONResponse(
            {"status": "ready" if ready else "not_ready", "checks": checks}, status_code=200 if ready else 503
        )

    async def _check_store(self) -> dict[str, str]:
        # Probes arriving during a check wait for it and share its answer.
        async with self._checking:
            if self._clock() - self._checked_at >= STORE_CHECK_SECONDS:
                readable = await self._store.is_ready()
                writable = readable and await self._store.is_writable()
                self._store_checks = {"store": _status(readable), "store_write": _status(writable)}
                self._checked_at = self._clock()
                if self._on_store_check is not None:
                    self._on_store_check(available=writable)
            return self._store_checks


def _status(ok: bool) -> str:
    return "ok" if ok else "unavailable"


def key_status(sources: Sequence[JwksKeySource]) -> str:
    """`ok` when every key set is, `unavailable` when none is usable, `degraded` in between."""
    statuses = {source.status() for source in sources}
    return statuses.pop() if len(statuses) == 1 else "degraded"
