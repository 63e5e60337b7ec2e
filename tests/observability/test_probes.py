"""`/health` and `/ready` (corporate §16) on every engine: readiness includes a write probe, and the
store's answer is shared by the probes of one second (issue 12)."""

from __future__ import annotations

import json

import pytest
from starlette.requests import Request

from aql_mcp.observability.probes import STORE_CHECK_SECONDS, Probes
from aql_mcp.store.base import Store
from tests.support.clock import Clock
from tests.support.engines import Backend, write_lock

pytestmark = pytest.mark.anyio
REQUEST = Request({"type": "http", "method": "GET", "path": "/ready", "headers": []})


async def ready(probes: Probes) -> tuple[int, dict[str, object]]:
    response = await probes.ready(REQUEST)
    return response.status_code, json.loads(bytes(response.body))


async def test_ready_checks_that_the_store_reads_and_writes(store: Store) -> None:
    status, body = await ready(Probes(store))
    assert status == 200
    assert body == {"status": "ready", "checks": {"store": "ok", "store_write": "ok"}}


async def test_a_store_that_cannot_write_is_not_ready_but_alive(backend: Backend) -> None:
    store = await backend.open()
    probes = Probes(store)
    async with write_lock(backend, "replicas"):
        status, body = await ready(probes)
        health = await probes.health(REQUEST)
    assert status == 503
    assert body == {"status": "not_ready", "checks": {"store": "ok", "store_write": "unavailable"}}
    assert health.status_code == 200


async def test_the_store_answer_is_kept_for_a_second(backend: Backend) -> None:
    """Probes in the same second share one look at the store: a lock taken meanwhile shows only
    when the answer is due again."""
    store = await backend.open()
    clock = Clock(1000.0)
    probes = Probes(store, clock=clock)
    assert (await ready(probes))[0] == 200
    async with write_lock(backend, "replicas"):
        assert (await ready(probes))[0] == 200
        clock.now += STORE_CHECK_SECONDS
        assert (await ready(probes))[0] == 503
    clock.now += STORE_CHECK_SECONDS
    assert (await ready(probes))[0] == 200


async def test_a_draining_replica_is_not_ready_at_once(store: Store) -> None:
    probes = Probes(store)
    assert (await ready(probes))[0] == 200
    probes.draining = True
    status, body = await ready(probes)
    assert status == 503
    assert body["status"] == "not_ready"


async def test_each_store_check_reports_its_answer_to_the_metrics(backend: Backend) -> None:
    """aql_mcp_store_available follows what /ready saw (the "store unavailable" alert)."""
    store = await backend.open()
    clock = Clock(1000.0)
    seen: list[bool] = []
    probes = Probes(store, clock=clock, on_store_check=lambda *, available: seen.append(available))
    await ready(probes)
    await ready(probes)  # the kept answer: no second report
    async with write_lock(backend, "replicas"):
        clock.now += STORE_CHECK_SECONDS
        await ready(probes)
    assert seen == [True, False]
