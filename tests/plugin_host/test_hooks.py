"""The core's hooks reach every plugin that has the method, and only those (plugin_host/hooks.py,
docs/plugins.md "Hooks"); the built-ins' own hooks keep the behaviour the core had before."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pytest

from aql_mcp.builtin_sections import RecordsSettings
from aql_mcp.plugin_host.hooks import PluginHooks
from aql_mcp.plugin_host.loader import load_plugins
from aql_mcp.plugins.records.store import Idempotency, NewRecord, Quota
from aql_mcp.protocol.primitives import Registry
from aql_mcp.settings import Settings
from aql_mcp.store.base import Store

pytestmark = pytest.mark.anyio


@dataclass
class Listening:
    name: str
    heard: list[tuple[str, object]] = field(default_factory=list)

    async def on_session_end(self, session_ids: Sequence[str], now: float) -> None:
        self.heard.append(("ended", (list(session_ids), now)))

    async def housekeeping(self, now: float) -> None:
        self.heard.append(("housekeeping", now))


@dataclass
class Failing:
    name: str = "failing"

    async def housekeeping(self, now: float) -> None:
        raise RuntimeError("boom")


@dataclass
class Deaf:
    name: str = "deaf"


async def test_each_hook_reaches_the_plugins_that_have_it_in_the_order_they_loaded() -> None:
    first, second = Listening("first"), Listening("second")
    hooks = PluginHooks([first, Deaf(), second])
    await hooks.session_end(["s1"], 5.0)
    await hooks.housekeeping(7.0)
    assert first.heard == second.heard == [("ended", (["s1"], 5.0)), ("housekeeping", 7.0)]


async def test_a_plugin_whose_housekeeping_fails_does_not_stop_the_next() -> None:
    after = Listening("after")
    await PluginHooks([Failing(), after]).housekeeping(1.0)
    assert after.heard == [("housekeeping", 1.0)]


async def test_the_records_plugin_purges_idempotency_keys_past_their_retention(store: Store) -> None:
    """What lifespan's housekeeping did with `store.records` before the records plugin had its hook."""
    settings = Settings(records=RecordsSettings(idempotency_retention_seconds=3600))
    hooks = PluginHooks(load_plugins(["aql_mcp.plugins.records:plugin"], Registry(), settings, store))
    records, quota = store.records, Quota(10, 10_000)  # type: ignore[attr-defined]
    await records.create_collection("t", "c", "", None, "2026-01-01T00:00:00Z")
    key = Idempotency("k", "h")
    await records.create_record("t", NewRecord("c", "a", {}, "e", "2026-01-01T00:00:00Z"), quota, key)
    await hooks.housekeeping(datetime(2026, 1, 1, 0, 30, tzinfo=UTC).timestamp())  # within the retention
    assert (await records.create_record("t", NewRecord("c", "b", {}, "e", "now"), quota, key))[1] is True
    await hooks.housekeeping(datetime(2026, 1, 1, 2, 0, tzinfo=UTC).timestamp())
    assert (await records.create_record("t", NewRecord("c", "b", {}, "e", "now"), quota, key))[1] is False
