"""CoalescedWrites (server/coalesced_writes.py): what a connection writes in one turn of the loop
leaves in one `write`, in order, and nothing is held past that turn or past a close."""

from __future__ import annotations

import asyncio
from typing import Any

from aql_mcp.server.coalesced_writes import CoalescedWrites


class RecordingTransport(asyncio.Transport):
    """The socket's side: what reached it, in the order it did."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[Any] = []

    def write(self, data: Any) -> None:
        self.events.append(bytes(data))

    def close(self) -> None:
        self.events.append("close")

    def abort(self) -> None:
        self.events.append("abort")

    def write_eof(self) -> None:
        self.events.append("eof")

    def get_write_buffer_size(self) -> int:
        return sum(len(e) for e in self.events if isinstance(e, bytes))

    def is_closing(self) -> bool:
        return "close" in self.events


async def _turn() -> None:
    """One turn of the loop: callbacks scheduled with call_soon before this have run."""
    done = asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().call_soon(done.set_result, None)
    await done


def test_a_head_and_a_body_written_in_one_turn_leave_as_one_write() -> None:
    async def run() -> list[Any]:
        raw = RecordingTransport()
        writes = CoalescedWrites(raw, asyncio.get_running_loop())
        writes.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")
        writes.write(b"")  # an empty body chunk adds nothing
        writes.write(b"{}")
        assert raw.events == []  # held until the end of this turn
        await _turn()
        writes.write(b"next")
        await _turn()
        return raw.events

    assert asyncio.run(run()) == [b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}", b"next"]


def test_close_and_eof_send_what_is_held_first_and_abort_drops_it() -> None:
    async def run() -> tuple[list[Any], list[Any]]:
        loop = asyncio.get_running_loop()
        closed, aborted = RecordingTransport(), RecordingTransport()
        first = CoalescedWrites(closed, loop)
        first.write(b"answer")
        first.write_eof()
        first.close()
        second = CoalescedWrites(aborted, loop)
        second.write(b"lost")
        second.abort()
        await _turn()
        return closed.events, aborted.events

    assert asyncio.run(run()) == ([b"answer", "eof", "close"], ["abort"])


def test_the_write_buffer_size_counts_held_bytes() -> None:
    """Flow control and the connection's deadlines ask for the buffer: held bytes are in it."""

    async def run() -> int:
        raw = RecordingTransport()
        writes = CoalescedWrites(raw, asyncio.get_running_loop())
        writes.write(b"12345")
        return writes.get_write_buffer_size()

    assert asyncio.run(run()) == 5
