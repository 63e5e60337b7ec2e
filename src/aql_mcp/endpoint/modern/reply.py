"""The answer to one modern request, and its `Outbound` (docs/eras.md).

One JSON body unless the handler talks first: a progress or log notification turns the answer
into an SSE stream at that moment, the notifications travel on it, and the result is its last
event (2026-07-28 Streamable HTTP, "Sending Messages"). The stream belongs to this request alone:
no event ids, no resumption, no GET (a modern client retries the request instead). Questions to the
client never travel on it as requests: they end the attempt with `input_required` (endpoint/modern/rounds.py).
"""

from __future__ import annotations

import asyncio
from typing import Any

import structlog
from starlette.types import Send

from aql_mcp.endpoint.modern.rounds import ASKING_METHODS, InputRound
from aql_mcp.endpoint.sse import HEADERS, KEEPALIVE, format_event
from aql_mcp.exceptions import InvalidParams, MissingClientCapability
from aql_mcp.jsonrpc.messages import encode_notification
from aql_mcp.responses import send_body

log = structlog.get_logger("aql_mcp.modern")


class Reply:
    """JSON until the first notification, then SSE; `finish` sends the last message either way.

    While it streams, a comment line every `streams.keepalive_seconds` keeps proxies from closing
    an idle connection: in this era a closed connection cancels the request.
    """

    __slots__ = ("_keepalive", "_keeping", "_method", "_round", "_send", "streaming")

    def __init__(self, send: Send, *, method: str, inputs: InputRound, keepalive_seconds: float) -> None:
        self._send = send
        self._method = method
        self._round = inputs
        self._keepalive = keepalive_seconds
        self._keeping: asyncio.Task[None] | None = None
        self.streaming = False

    def stop_keepalive(self) -> None:
        """End the keep-alive, before the last event is written (or when nothing more will be)."""
        if self._keeping is not None:
            self._keeping.cancel()
            self._keeping = None

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        if not self.streaming:
            self.streaming = True
            await self._send({"type": "http.response.start", "status": 200, "headers": HEADERS})
            if self._keepalive > 0:
                self._keeping = asyncio.get_running_loop().create_task(self._keep_alive())
        await self._write(format_event(None, encode_notification(method, params)), more=True)

    async def _keep_alive(self) -> None:
        # Cancelled by `stop_keepalive` before `finish` writes the last event.
        while True:
            await asyncio.sleep(self._keepalive)
            await self._write(KEEPALIVE, more=True)

    async def ask(self, requests: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        if self._method not in ASKING_METHODS:
            # Only tools/call, prompts/get and resources/read may answer `input_required` (mrtr).
            raise InvalidParams(
                f"Invalid params: {self._method} cannot ask the client for input", data={"reason": "input"}
            )
        return self._round.take(requests)

    def missing_capability(self, capability: str) -> Exception:
        if self.streaming:
            # Its 200 is sent: the -32021 can only be the stream's last event, not the 400 the spec
            # asks for. The handler should declare the capability (`Tool.client_capabilities`) or
            # call `ctx.require` before it reports progress (docs/eras.md, "Asking the client").
            log.warning("capability_missing_after_streaming", method=self._method, capability=capability)
        return MissingClientCapability(capability)

    async def close_connection(self) -> None:
        return None  # nothing to resume from: the stream stays open until the result

    async def finish(self, body: bytes, status: int, headers: list[tuple[bytes, bytes]] | None = None) -> None:
        """The last message: a JSON response, or the stream's last event (whose HTTP status was 200)."""
        if self.streaming:
            await self._write(format_event(None, body), more=False)
            return
        await send_body(self._send, status, body, headers)

    async def _write(self, chunk: bytes, *, more: bool) -> None:
        await self._send({"type": "http.response.body", "body": chunk, "more_body": more})
