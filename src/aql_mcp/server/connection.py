"""HTTP/1.1 connections with the limits uvicorn does not have (issue 12).

uvicorn 0.54 with httptools (pinned in pyproject.toml; this subclass follows that version's
`HttpToolsProtocol`) accepts a request head of any size, accumulating a header value in memory until
it ends; it has no deadline for reading a head, and its keep-alive timer starts only after a first
response, so a connection that never sends a byte, or trickles one byte at a time, lives forever.
Its `limit_concurrency` answers only once the headers are in. `LimitedHttpProtocol` closes those
gaps at the connection, before any ASGI work:

- at `http.max_connections` open connections, a new one takes the place of a connection with no
  request in flight: first one that never completed a request, whatever its age (a connect flood
  churns its own sockets), then one whose requests carried no valid token, then the others, oldest
  first, and never a served one quiet for less than a second; when none can go, the new one gets a
  complete 503 at once (docs/connections.md, "The connection cap");
- a connection with no request in flight closes after `http.idle_timeout_seconds` of silence;
- from the first byte of a request head until its headers are complete: `http.header_timeout_seconds`,
  then 408. Bytes that arrive while a request is in flight (empty lines, RFC 9112 §2.2, or the next
  pipelined head) start it only once that request is answered;
- at most `MAX_QUEUED_REQUESTS` pipelined requests wait behind the one being answered; past that the
  connection is answered so far and closed;
- a client that stops reading its answers (the transport pauses writing) is aborted after
  `http.body_timeout_seconds`; a connection closed by a deadline or an eviction with unsent data is
  aborted rather than left draining;
- the head (request line plus headers) is counted as it arrives, before httptools gathers more of it:
  beyond `http.max_header_bytes` or `http.max_headers`, 431. A connection holds at most the cap plus
  one read of head bytes;
- every byte of a message after its head counts too (chunk framing, trailer fields, which httptools
  gathers in memory until each ends): beyond `max_message_bytes`, 413, or a close if the answer
  has begun;
- when the app answered before the request body was all in (a 401 to a large POST), the rest of the
  body is read and dropped for at most `http.body_timeout_seconds`, then the connection is closed.
  (While the app reads a body, `BodyLimitMiddleware` polices its pace.)

A refusal (server/refusal.py) is a JSON-RPC error from the one encoder (`responses.error_object`); after it the
connection stops parsing, half-closes, and drops what still arrives for a moment, so the client can
read the answer instead of a reset (a close with unread data sends RST, RFC 9293 §3.6.1). At most
`max_lingering` refused connections of a port linger so; beyond that a refusal closes at once.
A request in flight (a long tool call, an SSE stream) is never cut by these timers. When the
replica stops accepting, a connection that has not yet sent its first request gets
`LAST_WORD_SECONDS` for it and is answered `Connection: close` (server/shutdown.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, ClassVar

import httptools
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from aql_mcp.endpoint.flag import Flag
from aql_mcp.exceptions import ConnectionLimitReached, InvalidRequest, RequestTimeout, WireError
from aql_mcp.scope import CONNECTION_KEY, PRINCIPAL_KEY
from aql_mcp.server.coalesced_writes import CoalescedWrites
from aql_mcp.server.connection_limits import LAST_WORD_SECONDS, LINGER_SECONDS, MAX_QUEUED_REQUESTS, ConnectionLimits
from aql_mcp.server.connection_table import ConnectionTable, Standing
from aql_mcp.server.deadline import Deadline
from aql_mcp.server.pipeline import Pipeline
from aql_mcp.server.refusal import half_close, headers_too_large, kind_of, message_too_large, write_refusal
from aql_mcp.server.request_count import RequestCount


def source_address(transport: asyncio.BaseTransport) -> str | None:
    """The peer's address, the TCP one (the gateway's, behind a gateway); None off TCP (a Unix socket)."""
    peer = transport.get_extra_info("peername")
    return str(peer[0]) if isinstance(peer, tuple) and peer else None


def protocol_for(limits: ConnectionLimits) -> type[asyncio.Protocol]:
    """The protocol class uvicorn builds for each connection of a port (`uvicorn.Config(http=...)`)."""

    class PortProtocol(LimitedHttpProtocol):
        pass

    PortProtocol.limits = limits
    PortProtocol.table = ConnectionTable[LimitedHttpProtocol]()
    return PortProtocol


class LimitedHttpProtocol(HttpToolsProtocol):
    """`HttpToolsProtocol` with a connection cap, head limits and deadlines (see the module docstring)."""

    limits: ClassVar[ConnectionLimits]
    table: ClassVar[ConnectionTable[LimitedHttpProtocol]]
    # Ours in slots keep the instance dict under CPython's 30 shared keys (docs/connections.md,
    # "What an open stream costs", as for the lighter pipeline and events below).
    __slots__ = (
        "_answered",
        "_count",
        "_deadline",
        "_last_word",
        "_lingering",
        "_lost",
        "_pipeline_full",
        "_refusal",
        "_refused",
        "_stall",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pipeline = Pipeline()  # type: ignore[assignment]  # the deque's operations uvicorn uses
        self._deadline = Deadline(self.loop)
        self._refused = False
        self._refusal: WireError | None = None
        self._count = RequestCount(self.limits)
        self._lingering = False
        self._stall = Deadline(self.loop)
        self._pipeline_full = False
        self._answered = False
        self._last_word = False
        self._lost: list[Callable[[], None]] | None = None

    # Connection -------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        source = source_address(transport)
        refusal = self._make_room(source)
        if refusal is not None:
            self.transport = transport
            self._refuse(refusal, refusal.data["limit"])
            return
        # A response's head and body leave in one segment (server/coalesced_writes.py).
        super().connection_made(CoalescedWrites(transport, self.loop))
        self.flow._is_writable_event = Flag(True)  # type: ignore[assignment]  # no deque until a write waits
        self.table.add(self, source)
        self.table.ripen_later(self.loop.call_soon)
        self._deadline.arm("idle", self.limits.idle_timeout, self._close)

    def _make_room(self, source: str | None) -> ConnectionLimitReached | None:
        """None when a new connection from `source` may open, evicting one if need be; else its refusal."""
        limits, table = self.limits, self.table
        per_source = limits.max_per_source
        if per_source is not None and source is not None and table.held_by(source) >= per_source:
            return ConnectionLimitReached(limit="connections_per_source")
        if len(table) < limits.max_connections:
            return None
        oldest = table.evictable(limits.min_evictable)
        if oldest is None:
            # Every connection has a request in flight, the served ones without are between two
            # requests of a burst, or the new ones were accepted with this one and not yet read:
            # refusing is clean, evicting would lose a request.
            return ConnectionLimitReached()
        oldest.evict()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._deadline.disarm()
        self._stall.disarm()
        self.table.remove(self)
        if self._lingering:
            self._lingering = False
            self.table.lingering -= 1
        super().connection_lost(exc)
        lost, self._lost = self._lost, None
        for callback in lost or ():
            callback()

    def watch_disconnect(self, callback: Callable[[], None]) -> None:
        """Call `callback` when the client goes away (a request in flight that wants to know:
        endpoint/modern/disconnect.py); `unwatch_disconnect` once it no longer does."""
        if self._lost is None:
            self._lost = []
        self._lost.append(callback)

    def unwatch_disconnect(self, callback: Callable[[], None]) -> None:
        if self._lost is not None and callback in self._lost:
            self._lost.remove(callback)

    def evict(self) -> None:
        """Close a connection with no request in flight to make room for a new one; it leaves the
        table now, not when the loop reports it closed."""
        self.limits.on_refusal("evicted")
        self._close()

    def pause_writing(self) -> None:
        """The client is not reading its answers: it has `http.body_timeout_seconds` to start again,
        or the connection is aborted (otherwise a request whose answer never drains stays in flight
        for ever, beyond every other deadline)."""
        super().pause_writing()
        self._stall.arm("stall", self.limits.body_timeout, self._write_stalled, keep=True)

    def resume_writing(self) -> None:
        super().resume_writing()
        self._stall.disarm()

    def _write_stalled(self) -> None:
        self._stall.disarm()
        self.limits.on_refusal("write_timeout")
        self._deadline.disarm()
        self.table.remove(self)
        self.transport.abort()

    def data_received(self, data: bytes) -> None:
        if self._refused or self._pipeline_full:
            return  # lingering, or past the pipelining bound: dropped unread
        in_head = self._count.head_open
        if in_head:
            self._begin_head()
        self._count.heads_completed = 0
        self._feed(data)
        if self._refused or self._pipeline_full or self.transport.is_closing():
            return  # a refusal, or the rest of this read dropped at the pipelining bound
        if not self._over_limits(len(data), in_head=in_head):
            self._settle()

    def _over_limits(self, size: int, *, in_head: bool) -> bool:
        """Count a read (request_count.py); refuse past the head or the message limit."""
        over = self._count.read(size, in_head=in_head)
        if over == "headers":
            self._refuse(headers_too_large(self.limits), "headers")
        elif over == "body":
            self._message_too_large()
        return over is not None

    def _feed(self, data: bytes) -> None:
        # uvicorn's `data_received`, with its parser errors answered as JSON-RPC errors.
        self._unset_keepalive_if_required()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
        except httptools.HttpParserError:
            if self._pipeline_full:
                return  # stopped on purpose at the pipelining bound (`on_headers_complete`)
            refusal, self._refusal = self._refusal, None
            self._refuse(refusal or InvalidRequest("Invalid request: malformed HTTP"), kind_of(refusal))

    def on_response_complete(self) -> None:
        answered = self.cycle
        self._answered = True
        standing = Standing.TRUSTED if answered.scope.get(PRINCIPAL_KEY) is not None else Standing.SERVED
        super().on_response_complete()
        cycle = self.cycle  # the next pipelined request, if one was waiting
        self.table.mark(self, in_flight=cycle is not None and not cycle.response_complete, standing=standing)
        if not self.transport.is_closing():
            self._settle()

    def shutdown(self) -> None:
        if self._refused:
            self.transport.close()
            return
        if self.cycle is None and not self._answered:
            # Accepted as the replica stops accepting: a gateway opens a connection to send a
            # request, which is on its way; closing now would lose it. Answered, then closed.
            self._last_word = True
            self._deadline.arm("last_word", LAST_WORD_SECONDS, self._close, keep=True)
            return
        super().shutdown()

    # Parser callbacks -------------------------------------------------------------------------

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.scope[CONNECTION_KEY] = self  # type: ignore[literal-required]  # an extension key
        self._begin_head()
        self._count.message_begun()

    def on_url(self, url: bytes) -> None:
        super().on_url(url)
        if self._count.field(len(url), fields=0):
            self._refuse_head()

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._count.header(name, value):
            self._refuse_head()
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._count.head_complete()
        self._deadline.disarm()
        if len(self.pipeline) >= MAX_QUEUED_REQUESTS:
            self._stop_pipelining()
        previous = self.cycle
        super().on_headers_complete()
        if self.cycle is not previous:  # a new request (not an upgrade): nothing waits on its event yet
            self.cycle.message_event = Flag()  # type: ignore[assignment]
        if self._last_word:
            self.cycle.keep_alive = False
        self.table.mark(self, in_flight=True)

    def _stop_pipelining(self) -> None:
        """Answer what is queued, then close; this head and whatever follows are dropped."""
        self._pipeline_full = True
        self.limits.on_refusal("pipeline")
        last, _ = self.pipeline[0]  # queued with appendleft: the newest is first
        last.keep_alive = False
        # Raised inside a parser callback, it stops httptools; `_feed` swallows it.
        raise _PipelineFull

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._count.message_complete()

    def _refuse_head(self) -> None:
        self._refusal = headers_too_large(self.limits)
        # Raised inside a parser callback, it stops httptools; `_feed` sends the refusal.
        raise self._refusal

    def _message_too_large(self) -> None:
        cycle = self.cycle
        if cycle is not None and cycle.response_started:
            # An answer is (being) sent: no room for another; the connection just ends.
            self._refused = True
            self.limits.on_refusal("body")
            self._close()
            return
        self._refuse(message_too_large(self.limits), "body", preempt=True)

    # Deadlines --------------------------------------------------------------------------------

    def _in_flight(self) -> bool:
        cycle = self.cycle
        return cycle is not None and not cycle.response_complete

    def _begin_head(self) -> None:
        """Head bytes arrived. With a request in flight (an SSE stream, a long call) they are only
        noted: empty lines before a request line are allowed (RFC 9112 §2.2) and a pipelined head
        waits its turn; the head deadline starts when the answer in flight is complete."""
        self._count.head_begun = True
        if not self._in_flight():
            self._deadline.arm("head", self.limits.header_timeout, self._head_timed_out, keep=True)

    def _settle(self) -> None:
        """Arm the deadline the connection's state calls for; a deadline already running keeps its
        time, so trickled bytes never extend it."""
        cycle = self.cycle
        if self._in_flight():
            self._deadline.disarm()  # a request in flight: the app and the body middleware own its time
        elif self._count.head_open and self._count.head_begun:
            self._deadline.arm("head", self.limits.header_timeout, self._head_timed_out, keep=True)
        elif self._count.head_open:
            self._deadline.arm("idle", self.limits.idle_timeout, self._close, keep=True)
        elif cycle is not None and cycle.response_complete:
            self._deadline.arm("drain", self.limits.body_timeout, self._drain_timed_out, keep=True)
        else:
            self._deadline.disarm()

    def _close(self) -> None:
        self._deadline.disarm()
        self.table.remove(self)  # out of the count now, not when the loop reports it lost
        transport = self.transport
        if transport.get_write_buffer_size() > 0:
            # An answer the client does not read: `close` would wait for it to drain, with no
            # deadline, holding the descriptor and the buffer outside the cap.
            transport.abort()
        elif not transport.is_closing():
            transport.close()

    def _head_timed_out(self) -> None:
        self._deadline.fired()
        if self._in_flight():
            return  # never cut a request in flight; `_settle` re-arms once its answer is complete
        seconds = self.limits.header_timeout
        self._refuse(RequestTimeout(data={"limit": "request_headers", "seconds": seconds}), "header_timeout")

    def _drain_timed_out(self) -> None:
        self.limits.on_refusal("body_timeout")
        self._close()

    # Refusals ---------------------------------------------------------------------------------

    def _refuse(self, error: WireError, kind: str, *, preempt: bool = False) -> None:
        """Answer `error`, stop parsing, half-close, and close once the client is done or after a moment.

        `preempt`: the refusal is about the request in flight, whose app has not begun to answer; the
        app then sees a disconnect (its sends are dropped) and the refusal is the answer."""
        self._deadline.disarm()
        self._refused = True
        self.table.remove(self)
        self.limits.on_refusal(kind)
        transport = self.transport
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete:
            if not preempt or cycle.response_started:
                # Behind a request still being answered: no room for a second answer.
                transport.close()
                return
            cycle.disconnected = True
            cycle.message_event.set()
        if transport.is_closing():
            return
        write_refusal(transport, error, kind, self.server_state.default_headers)
        table = self.table
        if not half_close(transport, lingering=table.lingering, max_lingering=self.limits.max_lingering):
            return
        table.lingering += 1
        self._lingering = True
        self._deadline.arm("linger", LINGER_SECONDS, transport.close)


class _PipelineFull(Exception):
    """Stops the parser at `MAX_QUEUED_REQUESTS`."""
