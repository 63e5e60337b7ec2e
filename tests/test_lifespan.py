"""The service calls the plugins' hooks (plugin_host/hooks.py) where the core used to name a plugin:
session end from the legacy edge, housekeeping from the lifespan's loop (docs/plugins.md, "Hooks")."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import anyio
import httpx
import pytest

from aql_mcp.app import create_app
from aql_mcp.protocol.primitives import Registry
from aql_mcp.settings import Settings
from tests.support.asgi import BASE, open_session

pytestmark = pytest.mark.anyio


@dataclass
class Listening:
    """A plain plugin that only subscribes to the hooks."""

    name: str = "listening"
    ended: list[str] = field(default_factory=list)
    housekeeping_runs: int = 0
    twice: anyio.Event = field(default_factory=anyio.Event)

    def register(self, registry: Registry) -> None:
        return

    async def on_session_end(self, session_ids: Sequence[str], now: float) -> None:
        self.ended.extend(session_ids)

    async def housekeeping(self, now: float) -> None:
        self.housekeeping_runs += 1
        if self.housekeeping_runs == 2:
            self.twice.set()


async def test_a_deleted_session_reaches_the_plugins_and_housekeeping_runs_theirs(
    settings: Settings, token: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("aql_mcp.lifespan.HOUSEKEEPING_SECONDS", 0.05)
    listening = Listening()
    app = create_app(settings, plugins=[listening])
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as http:
            session = await open_session(http, token)
            assert (await http.delete("/mcp", headers=session)).status_code == 204
        with anyio.fail_after(5):
            await listening.twice.wait()
    assert listening.ended == [session["mcp-session-id"]]
