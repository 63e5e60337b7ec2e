"""DisconnectWatch (endpoint/modern/disconnect.py): a client closing its request cancels the work (2026-07-28
basic/patterns/cancellation); only that cancellation is swallowed, never another one."""

from __future__ import annotations

import asyncio

import pytest
from starlette.types import Message

from aql_mcp.endpoint.modern.disconnect import DisconnectWatch

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Client:
    def __init__(self) -> None:
        self.gone = asyncio.Event()

    async def receive(self) -> Message:
        await self.gone.wait()
        return {"type": "http.disconnect"}


async def a_turn_of_the_loop() -> None:
    """Let every ready task run once, without waiting on the clock."""
    turned = asyncio.Event()
    asyncio.get_running_loop().call_soon(turned.set)
    await turned.wait()


async def test_a_disconnect_cancels_the_work_and_the_watch_swallows_it() -> None:
    client = Client()
    reached = []

    async def request() -> bool:
        with DisconnectWatch(client.receive) as watch:
            client.gone.set()
            await asyncio.Event().wait()  # the work: never done by itself
            reached.append("end")
        return watch.disconnected

    assert await asyncio.wait_for(request(), 5) is True
    assert reached == []


async def test_a_disconnect_after_the_work_is_done_cancels_nothing() -> None:
    client = Client()
    with DisconnectWatch(client.receive) as watch:
        await a_turn_of_the_loop()
    client.gone.set()
    await a_turn_of_the_loop()  # a disconnect after the answer must not cancel what follows
    await a_turn_of_the_loop()
    assert watch.disconnected is False


async def test_another_cancellation_is_not_swallowed() -> None:
    client = Client()
    entered = asyncio.Event()

    async def request() -> None:
        with DisconnectWatch(client.receive):
            entered.set()
            await asyncio.Event().wait()

    task = asyncio.get_running_loop().create_task(request())
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
