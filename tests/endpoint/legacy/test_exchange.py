"""A POST exchange's requests to the client, and how shutdown ends them (issue 12)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from aql_mcp.endpoint.legacy.exchange import PostExchange
from aql_mcp.endpoint.legacy.session import Session
from aql_mcp.endpoint.legacy.sessions import SessionManager
from aql_mcp.exceptions import ShuttingDown
from aql_mcp.store.base import Store
from tests.support.wait import eventually

pytestmark = pytest.mark.anyio

ELICIT = {"mode": "form", "message": "Who are you?", "requestedSchema": {"type": "object", "properties": {}}}


class Recorder:
    """The ASGI `send` of one exchange: what the client would have received."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []

    async def __call__(self, message: dict[str, Any]) -> None:
        self.messages.append(message)

    @property
    def body(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.messages if m["type"] == "http.response.body")

    @property
    def ended(self) -> bool:
        return any(m["type"] == "http.response.body" and not m.get("more_body") for m in self.messages)


@pytest.fixture
def manager(store: Store) -> SessionManager:
    return SessionManager(store, idle_seconds=100, max_open=10, retry_after=30)


async def open_session(manager: SessionManager) -> Session:
    return await manager.create(
        owner="owner",
        protocol_version="2025-11-25",
        client_info={"name": "client", "version": "1"},
        capabilities={"elicitation": {}, "sampling": {}},
        log_level="info",
    )


def exchange(session: Session, send: Recorder) -> PostExchange:
    return PostExchange(send=send, session=session, message_id=7, retry_ms=1000, connections=set())


async def test_a_call_waiting_for_the_clients_answer_ends_with_shutting_down_when_waits_are_interrupted(
    manager: SessionManager,
) -> None:
    session = await open_session(manager)
    outcome: list[BaseException] = []

    async def ask() -> None:
        try:
            await exchange(session, Recorder()).request("elicitation/create", ELICIT)
        except ShuttingDown as exc:
            outcome.append(exc)

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            group.start_soon(ask)
            await eventually(lambda: bool(session.pending), "the request never waited")
            assert manager.interrupt_waits(retry_ms=1500) == 1

    (error,) = outcome
    assert isinstance(error, ShuttingDown)
    assert (error.status, error.code, error.retry_ms) == (503, -32006, 1500)
    assert error.data == {"retryAfter": 2}
    assert session.pending == {}


async def test_a_request_to_the_client_once_shutdown_began_is_refused_without_being_sent(
    manager: SessionManager,
) -> None:
    session = await open_session(manager)
    assert manager.interrupt_waits(retry_ms=1000) == 0
    send = Recorder()

    with pytest.raises(ShuttingDown) as caught:
        await exchange(session, send).request("sampling/createMessage", {"messages": [], "maxTokens": 1})

    assert caught.value.data == {"retryAfter": 1}
    assert send.messages == []
    assert session.pending == {}


async def test_an_answer_ended_by_shutdown_carries_the_retry_field_in_its_final_event(manager: SessionManager) -> None:
    session = await open_session(manager)
    send = Recorder()
    post = exchange(session, send)
    await post.notify("notifications/message", {"level": "info", "data": "working"})

    await post.finish(b'{"jsonrpc":"2.0","id":7,"error":{}}', [], retry_ms=2500)

    final = send.body.split(b"\n\n")[-2]
    assert b"retry: 2500" in final.splitlines()
    assert final.endswith(b'data: {"jsonrpc":"2.0","id":7,"error":{}}')
    assert send.ended
