"""DisconnectWatch (disconnect.py): a client closing its request cancels the work (2026-07-28
basic/patterns/cancellation); only that cancellation is swallowed, never another one."""

from __future__ import annotations

import asyncio

import pytest
from starlette.types import Message

from aql_mcp.disconnect import DisconnectWatch


class Client:
    def __init__(self) -> None:
        self.gone = asyncio.Event()

    async def receive(self) -> Message:
        await self.gone.wait()
        return {"type": "http.disconnect"}


async def test_a_disconnect_cancels_the_work_and_the_watch_swallows_it() -> None:
    client = Client()
    reached = []

    async def request() -> bool:
        with DisconnectWatch(client.receive) as watch:
            asyncio.get_running_loop().call_later(0.01, client.gone.set)
            await asyncio.sleep(5)
            reached.append("end")
        return watch.disconnected

    assert await asyncio.wait_for(request(), 2) is True
    assert reached == []


async def test_without_a_disconnect_nothing_is_cancelled_even_if_it_comes_later() -> None:
    client = Client()
    with DisconnectWatch(client.receive) as watch:
        await asyncio.sleep(0.01)
    client.gone.set()
    await asyncio.sleep(0.01)  # a disconnect after the answer must not cancel what follows
    assert watch.disconnected is False


async def test_another_cancellation_is_not_swallowed() -> None:
    client = Client()

    async def request() -> None:
        with DisconnectWatch(client.receive):
            await asyncio.sleep(5)

    task = asyncio.get_running_loop().create_task(request())
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


pytestmark = pytest.mark.anyio
