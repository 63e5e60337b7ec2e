"""A batch pays its caller's rate budget one call per operation (issue 23): before, a batch of 50
`create_record` cost one call, so a caller with a budget of 3 stored as many records as it liked.
Through the real app and its rate limiter; the session's `initialize` and `initialized` pay one
call each, so a session starts with `BURST - 2`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from aql_mcp.settings import Settings
from tests.operations.client import Aql, aql_session, records_settings
from tests.support.asgi import rpc

pytestmark = pytest.mark.anyio
BURST = 5


def settings(state: Path, rate: float = 0.01) -> Settings:
    """A rate so low by default that nothing refills during a test."""
    return records_settings(state, limits={"rate_per_second": rate, "rate_burst": BURST})


def create(index: int) -> dict[str, Any]:
    return {"operation": "create_record", "params": {"collection": "notes", "data": {"i": index}}}


async def post(aql: Aql, tool: str, arguments: dict[str, Any]) -> httpx.Response:
    body = rpc("tools/call", {"name": tool, "arguments": arguments})
    return await aql.http.post("/mcp", content=json.dumps(body), headers=aql.headers)


async def test_a_batch_of_two_costs_two_calls(tmp_path: Path) -> None:
    async with aql_session(settings(tmp_path)) as aql:
        await aql.call("mcp_aql_create", "create_collection", collection="notes")  # 3 -> 2
        batch = await post(aql, "mcp_aql_create", {"operations": [create(0), create(1)]})  # 2 -> 0
        single = await post(aql, "mcp_aql_create", create(2))
    assert batch.status_code == 200
    assert batch.json()["result"]["structuredContent"]["summary"]["succeeded"] == 2
    assert single.status_code == 429


async def test_a_batch_the_budget_cannot_cover_is_refused_whole_before_any_item_runs(tmp_path: Path) -> None:
    async with aql_session(settings(tmp_path)) as aql:
        await aql.call("mcp_aql_create", "create_collection", collection="notes")  # 3 -> 2
        refused = await post(aql, "mcp_aql_create", {"operations": [create(0), create(1), create(2)]})  # 2 -> 1
        listed = await aql.call("mcp_aql_read", "list_records", collection="notes")  # 1 -> 0
    error = refused.json()["error"]
    assert refused.status_code == 429
    assert refused.headers["retry-after"] == str(error["data"]["retryAfter"])
    assert error["code"] == -32003
    assert error["data"]["budget"] == "rate"
    assert error["data"]["cost"] == 3
    assert listed["data"]["items"] == []


async def test_a_batch_larger_than_the_burst_runs_from_a_full_budget_and_is_paid_in_full(tmp_path: Path) -> None:
    """With several replicas each holds only its share of the burst, so a batch larger than the
    burst must still run; the caller then waits until all of it is refilled."""
    async with aql_session(settings(tmp_path, rate=2.0)) as aql:
        await anyio.sleep(1.5)  # the session's two calls refilled: a full budget of 5
        operations = [{"operation": "create_collection", "params": {"collection": "notes"}}]
        operations += [create(index) for index in range(9)]
        batch = await post(aql, "mcp_aql_create", {"operations": operations})  # 10 from a full 5
        after = await post(aql, "mcp_aql_read", {"operation": "list_collections", "params": {}})
    assert batch.status_code == 200
    assert batch.json()["result"]["structuredContent"]["summary"]["succeeded"] == 10
    assert after.status_code == 429
    # 5 - 10 = -5 tokens: the next call waits for 6 tokens at 2 per second.
    assert int(after.headers["retry-after"]) >= 2
