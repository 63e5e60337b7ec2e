"""StartupRefusalMiddleware: a configuration refusal in the lifespan fails the start without a traceback."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.types import Message

from aql_mcp.exceptions import ConfigError
from aql_mcp.middleware.refusal import Refusal, StartupRefusalMiddleware

pytestmark = pytest.mark.anyio


def failing_app(error: Exception, refusal: Refusal) -> Starlette:
    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        raise error
        yield  # pragma: no cover

    return Starlette(middleware=[Middleware(StartupRefusalMiddleware, refusal=refusal)], lifespan=lifespan)


async def start(app: Starlette, sent: list[Message]) -> None:
    async def receive() -> Message:
        return {"type": "lifespan.startup"}

    async def send(message: Message) -> None:
        sent.append(message)

    await app({"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}, receive, send)


async def test_a_configuration_refusal_fails_the_start_without_a_traceback_and_is_kept() -> None:
    refusal, error, sent = Refusal(), ConfigError("store: refused"), []
    await start(failing_app(error, refusal), sent)
    assert sent == [{"type": "lifespan.startup.failed", "message": ""}]
    assert refusal.error is error


async def test_any_other_failure_keeps_its_traceback_and_propagates() -> None:
    refusal = Refusal()
    sent: list[Message] = []
    with pytest.raises(RuntimeError):
        await start(failing_app(RuntimeError("bug"), refusal), sent)
    assert refusal.error is None
    assert [m["type"] for m in sent] == ["lifespan.startup.failed"]
    assert "Traceback" in sent[0]["message"]
