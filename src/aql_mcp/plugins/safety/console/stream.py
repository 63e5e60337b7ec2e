"""`GET /console/events`: the live region, pushed when it changes (docs/console.md, "Live updates").

An SSE stream (sse-starlette) that re-reads the operator desk every `console.refresh_seconds` and
sends the re-rendered live region as an `overview` event whenever its HTML differs from the last
one sent, the first time at once. Polling the store rather than listening to this replica's
signals is what makes a challenge raised or decided on another replica show up here. Comment pings
keep idle proxies from closing the stream. The credential is verified again before every tick
(the verifier caches, so this costs an introspection call only when its cache expired): the stream
ends when the operator's token expires, is revoked (an opaque token the IdP now calls inactive) or
lost the operator scope, or was signed out (signout.py, on any replica), so a signed-out or revoked
operator stops seeing codes; the browser
reconnects and is asked to sign in again. It also ends when the server shuts down. A store that
fails is retried at the next tick; the kind of failure is logged (never its text), nothing is sent.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import AsyncIterator

import anyio
import structlog
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.requests import Request
from starlette.responses import Response

from aql_mcp.plugin import AuthError, WireError
from aql_mcp.plugins.safety.console.csrf import csrf_token
from aql_mcp.plugins.safety.console.guard import Operator, operator_of
from aql_mcp.plugins.safety.console.signout import SignOuts
from aql_mcp.plugins.safety.console.tables import live_region
from aql_mcp.plugins.safety.desk import OperatorDesk

log = structlog.get_logger("aql_mcp.console")
EVENT = "overview"


class LiveStream:
    def __init__(self, desk: OperatorDesk, *, sign_outs: SignOuts, refresh_seconds: float, ping_seconds: float) -> None:
        self.desk = desk
        self.sign_outs = sign_outs
        self.refresh = refresh_seconds
        self.ping = ping_seconds

    async def events(self, request: Request) -> Response:
        operator = operator_of(request)
        return EventSourceResponse(
            self._changes(operator),
            ping=max(1, int(self.ping)),
            headers={"cache-control": "no-store", "x-accel-buffering": "no"},
        )

    async def _changes(self, operator: Operator) -> AsyncIterator[ServerSentEvent]:
        csrf = csrf_token(operator.credential)
        expires = operator.principal.expires_at
        last = b""
        while (expires is None or time.time() < expires) and await self._still_valid(operator):
            html = await self._render(csrf)
            digest = hashlib.sha256(html.encode("utf-8")).digest() if html is not None else last
            if digest != last:
                last = digest
                yield ServerSentEvent(data=html, event=EVENT)
            await anyio.sleep(self.refresh)

    async def _still_valid(self, operator: Operator) -> bool:
        try:
            principal = await operator.verifier.verify(operator.credential)
        except AuthError as exc:
            log.info("console_stream_ended", reason=exc.reason)
            return False
        except WireError as exc:
            # The IdP unreachable: no codes are shown on a credential nobody can vouch for.
            log.info("console_stream_ended", reason=type(exc).__name__)
            return False
        if await self._signed_out(operator):
            log.info("console_stream_ended", reason="signed_out")
            return False
        return operator.principal.scopes <= principal.scopes

    async def _signed_out(self, operator: Operator) -> bool:
        try:
            return await self.sign_outs.is_signed_out(operator.credential)
        except Exception as exc:
            # A store that cannot say: no codes on a credential that may have been signed out.
            log.warning("console_stream_ended", reason=type(exc).__name__)
            return True

    async def _render(self, csrf: str) -> str | None:
        try:
            return live_region(await self.desk.overview(), csrf)
        except Exception as exc:
            # Only the kind of failure: a store error's text may quote the rows it read (the codes).
            log.warning("console_refresh_failed", error=type(exc).__name__)
            return None
