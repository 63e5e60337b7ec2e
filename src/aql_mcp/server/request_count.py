"""What the request a connection is reading has cost so far, against its port's limits
(docs/connections.md): the head's raw bytes per read, its request target and header fields as the
parser reports them, and every byte of the message after its head (chunk framing, trailers).
`LimitedHttpProtocol` (connection.py) counts through it and answers what goes past a limit."""

from __future__ import annotations

from typing import Literal

from aql_mcp.server.connection_limits import HEADER_OVERHEAD, ConnectionLimits

Over = Literal["headers", "body"]


class RequestCount:
    """The counters of one connection's current request head and message."""

    __slots__ = (
        "_limits",
        "field_bytes",
        "fields",
        "head_begun",
        "head_bytes",
        "head_open",
        "heads_completed",
        "in_message",
        "message_bytes",
    )

    def __init__(self, limits: ConnectionLimits) -> None:
        self._limits = limits
        self.head_open = True  # waiting for, or reading, a request head
        self.head_begun = False
        self.head_bytes = 0  # raw bytes of the head being read, counted per read
        self.field_bytes = 0  # request target and header fields, counted by the parser callbacks
        self.fields = 0
        self.heads_completed = 0
        self.in_message = False
        self.message_bytes = 0  # raw bytes of the current message, head included, counted per read

    def read(self, size: int, *, in_head: bool) -> Over | None:
        """Count a read against the unfinished head, then against the open message; which limit it
        went past, if any."""
        if in_head and self.head_open and not self.heads_completed:
            # The whole read belongs to the unfinished head; counted after the parser took it, as a
            # read that completes a head may carry body bytes too.
            self.head_bytes += size
            if self.head_bytes > self._limits.max_header_bytes:
                return "headers"
        if self.in_message:
            # The whole read is charged to the message still open after it (a read that ended one
            # pipelined request and began the next is charged to the next: at most a read too many).
            self.message_bytes += size
            if self.message_bytes > self._limits.max_message_bytes:
                return "body"
        return None

    def field(self, size: int, *, fields: int) -> bool:
        """Count the request target or a header field; True once past the head limits."""
        self.field_bytes += size
        self.fields += fields
        return self.field_bytes > self._limits.max_header_bytes or self.fields > self._limits.max_headers

    def header(self, name: bytes, value: bytes) -> bool:
        return self.field(len(name) + len(value) + HEADER_OVERHEAD, fields=1)

    def message_begun(self) -> None:
        self.field_bytes = 0
        self.fields = 0
        self.in_message = True
        self.message_bytes = 0

    def head_complete(self) -> None:
        self.head_open = False
        self.heads_completed += 1

    def message_complete(self) -> None:
        self.in_message = False
        self.head_open = True
        self.head_begun = False
        self.head_bytes = 0
