"""Cancellation of a request in flight (MCP 2025-11-25 `basic/utilities/cancellation`).

`notifications/cancelled` and a session's end stop the task answering the request; the POST that
carried it still gets an answer the transport allows (`basic/transports`, "Sending Messages").
"""

from __future__ import annotations

import asyncio

import anyio
from starlette.types import Send

from aql_mcp.endpoint.legacy.exchange import PostExchange
from aql_mcp.endpoint.legacy.session import Session
from aql_mcp.endpoint.sse import Connection
from aql_mcp.jsonrpc.messages import Notification


class RunningRequest:
    """The task answering one request, as `notifications/cancelled` and a session's end stop it.

    A plain `Task.cancel()` that remembers it was asked: the service runs on asyncio, and an anyio
    cancel scope per request costs several times as much. The handler is cancelled at its next await.
    """

    __slots__ = ("_task", "cancelled")

    def __init__(self) -> None:
        self._task = asyncio.current_task()
        self.cancelled = False

    def cancel(self) -> None:
        if not self.cancelled and self._task is not None:
            self.cancelled = True
            self._task.cancel()

    def uncancel(self) -> None:
        """The cancellation has been handled: the task is no longer being cancelled (`Task.uncancel`)."""
        if self._task is not None:
            self._task.uncancel()


async def answer_cancelled(exchange: PostExchange, send: Send) -> None:
    """No response for a cancelled request (MCP cancellation), yet a POST must be answered with JSON
    or SSE (transports, "Sending Messages" 5): an exchange not yet started becomes an SSE stream that
    ends empty, one already streaming ends without the response."""
    with anyio.CancelScope(shield=True):
        if exchange.started:
            await exchange.abandon()
        else:
            empty = Connection(send)
            await empty.start([])
            await empty.end()


async def cancel_notified(session: Session, message: Notification) -> None:
    """`notifications/cancelled`: stop the request it names, if it names one by a valid id."""
    request_id = message.params.get("requestId")
    if isinstance(request_id, str | int) and not isinstance(request_id, bool):
        await session.cancel(request_id, str(message.params.get("reason", "")))
