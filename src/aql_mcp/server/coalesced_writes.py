"""A connection's writes within one turn of the event loop, sent to the socket as one.

uvicorn writes a response's head when the app sends `http.response.start` and its body when the app
sends the body, each straight to the socket: two `send` calls, two TCP segments, for an answer the
app produced in one step. The kernel's work per segment (on loopback, the receiver's too) was the
largest single cost of a call after the app itself (bench/PROFILE.md). `CoalescedWrites` stands
between the connection and its transport: a write is held until the end of the current loop turn,
and everything written in that turn leaves together. A stream's events still leave in the turn that
wrote them: nothing waits on a timer or on the next write.

Anything that ends the connection or asks about its buffer (`close`, `write_eof`, `abort`,
`get_write_buffer_size`) sees the held bytes first, so the order and the flow control are the ones
uvicorn expects; everything else goes to the transport unchanged.
"""

from __future__ import annotations

import asyncio
from typing import Any


class CoalescedWrites(asyncio.Transport):
    """The transport uvicorn's protocol and its request cycles write to (see the module docstring)."""

    __slots__ = ("_held", "_loop", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self._transport = transport
        self._loop = loop
        self._held: list[bytes | bytearray | memoryview] | None = None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            return
        held = self._held
        if held is not None:
            held.append(data)
            return
        self._held = [data]
        self._loop.call_soon(self.flush)

    def flush(self) -> None:
        held, self._held = self._held, None
        if held:
            self._transport.write(held[0] if len(held) == 1 else b"".join(held))

    def writelines(self, list_of_data: Any) -> None:
        for data in list_of_data:
            self.write(data)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def write_eof(self) -> None:
        self.flush()
        self._transport.write_eof()

    def abort(self) -> None:
        self._held = None
        self._transport.abort()

    def get_write_buffer_size(self) -> int:
        self.flush()
        return self._transport.get_write_buffer_size()

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def can_write_eof(self) -> bool:
        return self._transport.can_write_eof()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._transport.get_extra_info(name, default)

    def pause_reading(self) -> None:
        self._transport.pause_reading()

    def resume_reading(self) -> None:
        self._transport.resume_reading()

    def is_reading(self) -> bool:
        return self._transport.is_reading()

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self.flush()
        self._transport.set_protocol(protocol)

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self._transport.get_protocol()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self._transport.set_write_buffer_limits(high, low)

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self._transport.get_write_buffer_limits()
