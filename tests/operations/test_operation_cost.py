"""Operations declare what a call costs of the caller's rate budget (issue 23, docs/aql.md "Cost of a
call"): an export or an import costs 5, everything else 1; a batch costs the sum of its items. Through
the real app, its rate limiter and the records and executions plugins; the session's `initialize` and
`initialized` pay one call each, so a session starts with `BURST - 2`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from aql_mcp.auth.principal import subject_digest
from aql_mcp.exceptions import ConfigError
from aql_mcp.operations.models import Operation
from aql_mcp.operations.registry import OperationRegistry
from aql_mcp.plugins.executions.catalog import BACKGROUND_COST
from aql_mcp.settings import Settings
from aql_mcp.store.factory import open_store
from tests.operations.client import Aql, aql_session
from tests.support.asgi import dev_settings, rpc

pytestmark = pytest.mark.anyio
PLUGINS = ["aql_mcp.plugins.records:plugin", "aql_mcp.plugins.executions:plugin"]
EXPORT = {"operation": "execute_export", "params": {"collection": "notes"}}


def settings(state: Path, burst: int) -> Settings:
    """A rate so low that nothing refills during a test; the family tools and `mcp_aql`, which takes
    a batch mixing families."""
    return dev_settings(
        state,
        server={"plugins": PLUGINS, "builtin_plugins": []},
        limits={"rate_per_second": 0.01, "rate_burst": burst},
        aql={"mode": "all"},
    )


def create(index: int) -> dict[str, Any]:
    return {"operation": "create_record", "params": {"collection": "notes", "data": {"i": index}}}


async def post(aql: Aql, tool: str, arguments: dict[str, Any]) -> httpx.Response:
    body = rpc("tools/call", {"name": tool, "arguments": arguments})
    return await aql.http.post("/mcp", content=json.dumps(body), headers=aql.headers)


def spent(response: httpx.Response) -> dict[str, Any]:
    """The 429's account of the budget: -32003, Retry-After, which budget, the cost asked, what is left."""
    assert response.status_code == 429, response.text
    error = response.json()["error"]
    assert error["code"] == -32003
    assert response.headers["retry-after"] == str(error["data"]["retryAfter"])
    return {key: error["data"][key] for key in ("budget", "cost", "remaining")}


async def test_an_export_spends_the_budget_faster_than_a_read(tmp_path: Path) -> None:
    async with aql_session(settings(tmp_path, burst=8)) as aql:
        await aql.call("mcp_aql_create", "create_collection", collection="notes")  # 6 -> 5
        export = await post(aql, "mcp_aql_execute", EXPORT)  # 5 -> 0
        refused = await post(aql, "mcp_aql_read", {"operation": "list_collections", "params": {}})
    assert export.status_code == 200, export.text
    assert export.json()["result"]["structuredContent"]["success"] is True
    assert spent(refused) == {"budget": "rate", "cost": 1, "remaining": 0}


async def test_an_export_the_budget_cannot_cover_is_refused_before_it_starts(tmp_path: Path) -> None:
    async with aql_session(settings(tmp_path, burst=5)) as aql:
        await aql.call("mcp_aql_create", "create_collection", collection="notes")  # 3 -> 2
        refused = await post(aql, "mcp_aql_execute", EXPORT)  # 2 -> 1 at admission; 4 more refused
        listed = await aql.call("mcp_aql_read", "list_executions")  # 1 -> 0
    assert spent(refused) == {"budget": "rate", "cost": BACKGROUND_COST, "remaining": 1}
    assert listed["data"]["items"] == []


async def test_a_batch_pays_the_sum_of_its_operations_costs(tmp_path: Path) -> None:
    async with aql_session(settings(tmp_path, burst=10)) as aql:
        await aql.call("mcp_aql_create", "create_collection", collection="notes")  # 8 -> 7
        cheap = await post(aql, "mcp_aql_create", {"operations": [create(0), create(1)]})  # 7 -> 5
        mixed = [{"operation": "list_records", "params": {"collection": "notes"}}, EXPORT]
        refused = await post(aql, "mcp_aql", {"operations": mixed})  # 1 + 5 > 5
        await aql.call("mcp_aql_read", "list_collections")  # 5 -> 4
        listed = await aql.call("mcp_aql_read", "list_executions")  # 4 -> 3
    assert cheap.status_code == 200
    assert spent(refused) == {"budget": "rate", "cost": 1 + BACKGROUND_COST, "remaining": 4}
    assert listed["data"]["items"] == []


async def test_a_batch_of_mixed_costs_within_the_budget_runs_every_item(tmp_path: Path) -> None:
    async with aql_session(settings(tmp_path, burst=10)) as aql:
        await aql.call("mcp_aql_create", "create_collection", collection="notes")  # 8 -> 7
        batch = await post(aql, "mcp_aql", {"operations": [create(0), EXPORT, create(1)]})  # 7 -> 0
        after = await post(aql, "mcp_aql_read", {"operation": "list_collections", "params": {}})
    assert batch.json()["result"]["structuredContent"]["summary"] == {"total": 3, "succeeded": 3, "failed": 0}
    assert spent(after) == {"budget": "rate", "cost": 1, "remaining": 0}


async def test_a_call_or_batch_the_budget_cannot_cover_is_an_audited_rate_limit_refusal(tmp_path: Path) -> None:
    config = settings(tmp_path, burst=10)
    async with aql_session(config) as aql:
        await aql.call("mcp_aql_create", "create_collection", collection="notes")  # 8 -> 7
        batch = await post(aql, "mcp_aql", {"operations": [EXPORT, EXPORT]})  # 7 -> 6 at admission; 10 refused
        await aql.call("mcp_aql_create", "create_record", collection="notes", data={"i": 0})  # 6 -> 5
        single = await post(aql, "mcp_aql_execute", EXPORT)  # 5 -> 4 at admission: 4 more is 0, runs
        refused = await post(aql, "mcp_aql_execute", EXPORT)  # 0: refused by the limiter itself
        await post(aql, "mcp_aql_read", {"operation": "list_collections", "params": {}})  # refused too
    assert spent(batch)["cost"] == 2 * BACKGROUND_COST
    assert single.status_code == 200
    assert refused.status_code == 429
    store = open_store(config)
    await store.open()
    try:
        rows = [row for row in await store.audit.records() if row.kind == "rate_limit"]
    finally:
        await store.close()
    assert [(row.operation, row.outcome, row.code, row.subject) for row in rows][:2] == [
        ("batch", "refused", "rate", subject_digest("alice")),
        ("/mcp", "refused", "rate", subject_digest("alice")),
    ]


async def test_introspection_says_what_a_costly_operation_costs(tmp_path: Path) -> None:
    async with aql_session(settings(tmp_path, burst=100)) as aql:
        export = await aql.call("mcp_aql_read", "introspect", query="operations", name="execute_export")
        listing = await aql.call("mcp_aql_read", "introspect", query="operations", name="list_executions")
    assert f"Rate cost: {BACKGROUND_COST} calls" in export["data"]["operation"]["description"]
    assert "Rate cost" not in listing["data"]["operation"]["description"]


async def noop(params: Any, call: Any) -> dict[str, Any]:
    return {}


@pytest.mark.parametrize("cost", [0, -1, 101, 2.5, True, "5"])
def test_a_cost_outside_one_to_a_hundred_stops_startup_naming_the_operation(cost: Any) -> None:
    registry = OperationRegistry()
    with pytest.raises(ConfigError, match=r"plugin p: operation 'costly' declares cost .* from 1 to 100"):
        registry.add(Operation("costly", "READ", "d", noop, cost=cost), plugin="p", trust="validated")
    assert registry.get("costly") is None


@pytest.mark.parametrize("cost", [1, 100])
def test_the_bounds_are_accepted(cost: int) -> None:
    registry = OperationRegistry()
    registry.add(Operation("costly", "READ", "d", noop, cost=cost), plugin="p", trust="validated")
    operation = registry.get("costly")
    assert operation is not None
    assert operation.cost == cost
