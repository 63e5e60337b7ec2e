"""The index operations through the MCP-AQL tools on both engines: create_index, list_indexes,
drop_index and create_collection's `indexes`; the warning of a listing no index serves; the
refusals with their codes (docs/aql.md, "Indexed fields")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from aql_mcp.settings import Settings
from tests.operations.client import Aql, aql_session, records_settings
from tests.support.engines import Backend

pytestmark = pytest.mark.anyio


def _settings(backend: Backend, **records: Any) -> Settings:
    store: dict[str, Any] = {"url": backend.url} if backend.url else {}
    # create_index costs 10 calls of the rate budget: a budget these tests do not run out of.
    limits = {"rate_per_second": 1000, "rate_burst": 1000}
    return records_settings(backend.path, store=store, limits=limits, records={"max_indexes": 3, **records})


async def _tasks(aql: Aql) -> None:
    created = await aql.call(
        "mcp_aql_create",
        "create_collection",
        collection="tasks",
        indexes=[{"field": "status", "type": "string"}],
    )
    assert created["success"] is True, created
    assert created["data"]["indexes"] == [{"field": "status", "type": "string"}]
    for n in range(30):
        data = {"status": f"s{n % 3}", "meta": {"size": n}, "n": n}
        assert (await aql.call("mcp_aql_create", "create_record", collection="tasks", data=data))["success"]


async def test_an_indexed_filter_answers_without_a_warning_and_an_unindexed_one_warns(backend: Backend) -> None:
    async with aql_session(_settings(backend)) as aql:
        await _tasks(aql)
        indexed = await aql.call("mcp_aql_read", "list_records", collection="tasks", filter={"status": "s1"})
        scanned = await aql.call("mcp_aql_read", "list_records", collection="tasks", filter={"n": {"gte": 28}})
        plain = await aql.call("mcp_aql_read", "list_records", collection="tasks", first=2)
    assert indexed["success"] is True
    assert len(indexed["data"]["items"]) == 10
    assert "warnings" not in indexed
    assert [item["n"] for item in scanned["data"]["items"]] == [28, 29]
    (warning,) = scanned["warnings"]
    assert warning["code"] == "PERFORMANCE_UNINDEXED_QUERY_WARNING"
    assert warning["details"]["fields"] == ["n"]
    assert warning["severity"] == "low"
    assert "warnings" not in plain


async def test_create_index_builds_it_and_list_and_drop_follow(backend: Backend) -> None:
    async with aql_session(_settings(backend)) as aql:
        await _tasks(aql)
        created = await aql.call("mcp_aql_create", "create_index", collection="tasks", field="meta.size", type="number")
        ranged = await aql.call(
            "mcp_aql_read",
            "list_records",
            collection="tasks",
            filter={"meta.size": {"gte": 10, "lt": 13}},
            sort={"field": "meta.size", "order": "desc"},
        )
        listed = await aql.call("mcp_aql_read", "list_indexes", collection="tasks")
        dropped = await aql.call("mcp_aql_delete", "drop_index", collection="tasks", field="meta.size", type="number")
        after = await aql.call("mcp_aql_read", "list_indexes", collection="tasks")
        again = await aql.call("mcp_aql_delete", "drop_index", collection="tasks", field="meta.size", type="number")
    assert created["data"] == {"collection": "tasks", "field": "meta.size", "type": "number", "state": "ready"}
    assert [item["n"] for item in ranged["data"]["items"]] == [12, 11, 10]
    assert "warnings" not in ranged
    # In field order.
    assert listed["data"]["items"] == [
        {"collection": "tasks", "field": "meta.size", "type": "number", "state": "ready"},
        {"collection": "tasks", "field": "status", "type": "string", "state": "ready"},
    ]
    assert listed["data"]["max_indexes"] == 3
    assert dropped["data"]["deleted"] is True
    assert [item["field"] for item in after["data"]["items"]] == ["status"]
    assert again["error"]["code"] == "NOT_FOUND_RESOURCE"


async def test_index_declarations_are_refused_with_their_codes(backend: Backend) -> None:
    async with aql_session(_settings(backend)) as aql:
        await _tasks(aql)

        async def create(**params: Any) -> dict[str, Any]:
            return await aql.call("mcp_aql_create", "create_index", **params)

        bad_name = await create(collection="tasks", field="meta..size")
        array_position = await create(collection="tasks", field="tags.0")
        bad_type = await create(collection="tasks", field="n", type="boolean")
        system = await create(collection="tasks", field="created_at")
        hidden = await create(collection="tasks", field="_etag")
        unknown = await create(collection="nothing", field="n")
        twice = await create(collection="tasks", field="status")
        assert (await create(collection="tasks", field="n", type="number"))["success"] is True
        assert (await create(collection="tasks", field="n"))["success"] is True
        too_many = await create(collection="tasks", field="meta.size", type="number")
        at_creation = await aql.call("mcp_aql_create", "create_collection", collection="more", indexes=[{"field": "a"}])
        fields = await aql.call(
            "mcp_aql_create",
            "create_collection",
            collection="typed",
            fields=["title"],
            indexes=[{"field": "body"}],
        )
    for refused in (bad_name, array_position, bad_type, hidden):
        assert refused["error"]["code"] == "VALIDATION_INVALID_TYPE", refused
    for refused in (system, fields):
        assert refused["error"]["code"] == "VALIDATION_UNKNOWN_FIELD", refused
    assert system["error"]["details"]["unknown_fields"] == ["created_at"]
    assert unknown["error"]["code"] == "NOT_FOUND_RESOURCE"
    assert twice["error"]["code"] == "CONFLICT_ALREADY_EXISTS"
    assert too_many["error"]["code"] == "RATE_LIMIT_QUOTA_EXHAUSTED"
    assert too_many["error"]["details"] == {"metric": "indexes", "current": 3, "hard_stop_threshold": 3}
    assert at_creation["error"]["code"] == "RATE_LIMIT_QUOTA_EXHAUSTED"


async def test_introspection_shows_the_index_operations(tmp_path: Path) -> None:
    async with aql_session(records_settings(tmp_path)) as aql:
        found = {
            name: (await aql.call("mcp_aql_read", "introspect", query="operations", name=name))["data"]["operation"]
            for name in ("create_index", "list_indexes", "drop_index", "create_collection")
        }
    parameters = {name: {p["name"]: p for p in found[name]["parameters"]} for name in found}
    assert set(parameters["create_index"]) == {"collection", "field", "type"}
    assert parameters["create_index"]["type"]["default"] == "string"
    assert set(parameters["drop_index"]) == {"collection", "field", "type"}
    assert set(parameters["list_indexes"]) == {"collection"}
    assert "indexes" in parameters["create_collection"]
    assert (found["create_index"]["semantic_category"], found["create_index"]["mcpTool"]) == (
        "CREATE",
        "mcp_aql_create",
    )
    assert (found["list_indexes"]["semantic_category"], found["list_indexes"]["mcpTool"]) == ("READ", "mcp_aql_read")
    assert (found["drop_index"]["semantic_category"], found["drop_index"]["mcpTool"]) == ("DELETE", "mcp_aql_delete")
    # Dropping an index loses no record: reversible, no confirmation.
    assert found["drop_index"]["permissions"] == {"readOnly": False, "destructive": False}
