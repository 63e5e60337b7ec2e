"""The limits of one listening port's HTTP/1.1 connections, and the constants behind them
(docs/connections.md); `LimitedHttpProtocol` (connection.py) applies them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

# How long a refused connection keeps reading (and dropping) before it closes: enough for a client
# to read the answer and stop sending, short enough that refusals hold few file descriptors.
LINGER_SECONDS = 2.0
# How long a connection accepted as the replica stops accepting waits for its first request (already
# on its way from a gateway) before it closes; bounded, as a client may connect and say nothing.
LAST_WORD_SECONDS = 1.0
# Refused connections of a port that may linger at once, outside the connection cap: a connect
# flood would otherwise hold twice the connect rate in descriptors (two seconds of refusals).
LINGERING_REFUSALS = 32
# What each header costs on the wire besides its name and value: ": " and CRLF.
HEADER_OVERHEAD = 4
# Requests parsed and waiting behind the one being answered: a pipelining client gets this many
# answers, then the connection closes (RFC 9112 §9.3.2 lets it retry the rest). Without a bound, one
# read of thousands of pipelined heads queued thousands of requests in memory.
MAX_QUEUED_REQUESTS = 8
# A served connection with a request started or ended this recently is never evicted: a client
# between two requests of a burst keeps its connection. Never-served connections have no floor
# (issue 27, N3): with one, a flood kept every slot younger than it and new connections got 503.
MIN_EVICTABLE_SECONDS = 1.0
# Refusals a connect flood causes by the thousand: counted, never logged one by one.
FLOOD_REFUSALS = frozenset({"connections", "connections_per_source"})


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """The limits of one listening port; `on_refusal` counts each refusal by kind (metrics)."""

    max_connections: int
    max_header_bytes: int
    max_headers: int
    header_timeout: float
    body_timeout: float
    idle_timeout: float
    # Every byte of one request (head, body, chunk framing, trailers) as it comes off the socket.
    max_message_bytes: int
    on_refusal: Callable[[str], None] = lambda kind: None
    max_lingering: int = LINGERING_REFUSALS
    min_evictable: float = MIN_EVICTABLE_SECONDS
    # Open connections from one source address (`http.max_connections_per_source`); None: no cap.
    max_per_source: int | None = None


def message_bound(*, max_body_bytes: int, max_header_bytes: int) -> int:
    """What one request may take on the wire: its head, twice the body for chunk framing (chunks of
    8 bytes or more; framing costs the hex size and two CRLFs), and room for trailer fields."""
    return 2 * max_body_bytes + 2 * max_header_bytes
