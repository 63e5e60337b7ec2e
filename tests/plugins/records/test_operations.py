"""The `records` plugin through the MCP-AQL tools: CRUD, tenants, etags, querying, batch, confirmation."""

from __future__ import annotations

import base64
from pathlib import Path

import orjson
import pytest

from aql_mcp.testing.client import plugin_client
from tests.operations.client import Aql, aql_session, records_settings


def cursor_key(cursor: object) -> object:
    """The sort key a records cursor holds, without the query it is bound to."""
    assert isinstance(cursor, str)
    return orjson.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))["k"]


pytestmark = pytest.mark.anyio


async def _record(aql: Aql, data: dict[str, object], collection: str = "notes") -> dict[str, object]:
    result = await aql.call("mcp_aql_create", "create_record", collection=collection, data=data)
    assert result["success"] is True, result
    return dict(result["data"])


async def _notes(aql: Aql) -> None:
    assert (await aql.call("mcp_aql_create", "create_collection", collection="notes"))["success"]


async def test_update_reproduces_the_deep_merge_example_of_the_spec(tmp_path: Path) -> None:
    """MCP-AQL §4.5.1, exactly: objects merge, arrays replace, absent keys are preserved."""
    async with aql_session(records_settings(tmp_path)) as aql:
        await _notes(aql)
        old = {"title": "Old Title", "metadata": {"priority": "low", "tags": ["draft"], "author": "alice"}}
        record = await _record(aql, old)
        patch = {"title": "New Title", "metadata": {"priority": "high", "tags": ["published", "reviewed"]}}
        updated = await aql.call("mcp_aql_update", "update_record", collection="notes", id=record["id"], input=patch)
        state = await aql.call(
            "mcp_aql_read", "get_record", collection="notes", id=record["id"], fields=["title", "metadata"]
        )
    assert updated["success"] is True
    assert state["data"] == {
        "title": "New Title",
        "metadata": {"priority": "high", "tags": ["published", "reviewed"], "author": "alice"},
    }


async def test_null_in_input_removes_the_field(tmp_path: Path) -> None:
    """MCP-AQL §4.5.2."""
    async with aql_session(records_settings(tmp_path)) as aql:
        await _notes(aql)
        record = await _record(aql, {"metadata": {"deprecated_field": 1, "keep": 2}})
        updated = await aql.call(
            "mcp_aql_update",
            "update_record",
            collection="notes",
            id=record["id"],
            input={"metadata": {"deprecated_field": None}},
        )
    assert updated["data"]["metadata"] == {"keep": 2}


async def test_update_without_input_is_missing_param_and_system_fields_are_unknown_fields(tmp_path: Path) -> None:
    """MCP-AQL §4.5.3."""
    async with aql_session(records_settings(tmp_path)) as aql:
        await _notes(aql)
        record = await _record(aql, {"a": 1})
        missing = await aql.call("mcp_aql_update", "update_record", collection="notes", id=record["id"])
        unknown = await aql.call(
            "mcp_aql_update", "update_record", collection="notes", id=record["id"], input={"id": "x", "_etag": "y"}
        )
    assert missing["error"]["code"] == "VALIDATION_MISSING_PARAM"
    assert unknown["error"]["code"] == "VALIDATION_UNKNOWN_FIELD"


async def test_collection_with_declared_fields_refuses_others(tmp_path: Path) -> None:
    async with aql_session(records_settings(tmp_path)) as aql:
        await aql.call("mcp_aql_create", "create_collection", collection="people", fields=["name"])
        refused = await aql.call("mcp_aql_create", "create_record", collection="people", data={"age": 3})
        accepted = await aql.call("mcp_aql_create", "create_record", collection="people", data={"name": "bo"})
    assert refused["error"]["code"] == "VALIDATION_UNKNOWN_FIELD"
    assert accepted["success"] is True


async def test_if_match_with_a_stale_etag_is_a_version_mismatch(tmp_path: Path) -> None:
    """MCP-AQL §9.3.2."""
    async with aql_session(records_settings(tmp_path)) as aql:
        await _notes(aql)
        record = await _record(aql, {"n": 1})
        first = await aql.call(
            "mcp_aql_update",
            "update_record",
            collection="notes",
            id=record["id"],
            input={"n": 2},
            if_match=record["_etag"],
        )
        stale = await aql.call(
            "mcp_aql_update",
            "update_record",
            collection="notes",
            id=record["id"],
            input={"n": 3},
            if_match=record["_etag"],
        )
        delete_stale = await aql.call(
            "mcp_aql_delete", "delete_record", collection="notes", id=record["id"], if_match=record["_etag"]
        )
    assert first["data"]["_etag"] != record["_etag"]
    assert stale["error"]["code"] == "CONFLICT_VERSION_MISMATCH"
    assert delete_stale["error"]["code"] == "CONFLICT_VERSION_MISMATCH"


async def test_a_tenant_never_sees_or_touches_another_tenants_records(tmp_path: Path) -> None:
    async with aql_session(records_settings(tmp_path)) as alice:
        await _notes(alice)
        record = await _record(alice, {"secret": "s"})
        bob = await alice.as_user("bob")
        read = await bob.call("mcp_aql_read", "get_record", collection="notes", id=record["id"])
        update = await bob.call(
            "mcp_aql_update", "update_record", collection="notes", id=record["id"], input={"secret": "x"}
        )
        delete = await bob.call("mcp_aql_delete", "delete_record", collection="notes", id=record["id"])
        listed = await bob.call("mcp_aql_read", "list_collections")
        still = await alice.call("mcp_aql_read", "get_record", collection="notes", id=record["id"])
    assert {read["error"]["code"], update["error"]["code"], delete["error"]["code"]} == {"NOT_FOUND_RESOURCE"}
    assert listed["data"]["items"] == []
    assert still["data"]["secret"] == "s"


async def test_the_test_client_drives_records_in_a_few_lines() -> None:
    """The plugin authors' test client (aql_mcp.testing.client) on a built-in plugin: quota and tenants."""
    async with plugin_client("aql_mcp.plugins.records:plugin", settings={"records": {"max_records": 1}}) as alice:
        await alice.operation("create_collection", {"collection": "notes"})
        created = await alice.operation("create_record", {"collection": "notes", "data": {"n": 1}})
        refused = await alice.operation("create_record", {"collection": "notes", "data": {"n": 2}})
        bob = await alice.as_user("bob")
        hidden = await bob.operation("get_record", {"collection": "notes", "id": created["data"]["id"]})
    assert refused["error"]["code"] == "RATE_LIMIT_QUOTA_EXHAUSTED"
    assert hidden["error"]["code"] == "NOT_FOUND_RESOURCE"


async def test_delete_record_runs_and_the_record_is_gone(tmp_path: Path) -> None:
    async with aql_session(records_settings(tmp_path)) as aql:
        await _notes(aql)
        record = await _record(aql, {"a": 1})
        deleted = await aql.call("mcp_aql_delete", "delete_record", collection="notes", id=record["id"])
        gone = await aql.call("mcp_aql_read", "get_record", collection="notes", id=record["id"])
    assert deleted["data"]["deleted"] is True
    assert gone["error"]["code"] == "NOT_FOUND_RESOURCE"


async def test_idempotency_key_replays_the_first_result_and_refuses_other_parameters(tmp_path: Path) -> None:
    async with aql_session(records_settings(tmp_path)) as aql:
        await _notes(aql)
        params = {"collection": "notes", "data": {"a": 1}, "idempotency_key": "k1"}
        first = await aql.call("mcp_aql_create", "create_record", **params)
        again = await aql.call("mcp_aql_create", "create_record", **params)
        other = await aql.call("mcp_aql_create", "create_record", **{**params, "data": {"a": 2}})
        listed = await aql.call("mcp_aql_read", "list_records", collection="notes")
    assert again["data"] == first["data"]
    assert other["error"]["code"] == "CONFLICT_ALREADY_EXISTS"
    assert listed["data"]["pageInfo"]["totalCount"] == 1


async def test_quota_of_records_is_refused_with_quota_exhausted(tmp_path: Path) -> None:
    async with aql_session(records_settings(tmp_path, records={"max_records": 2})) as aql:
        await _notes(aql)
        await _record(aql, {"a": 1})
        await _record(aql, {"a": 2})
        refused = await aql.call("mcp_aql_create", "create_record", collection="notes", data={"a": 3})
    assert refused["error"]["code"] == "RATE_LIMIT_QUOTA_EXHAUSTED"
    assert refused["error"]["details"]["metric"] == "records"


async def test_filter_sort_fields_and_search(tmp_path: Path) -> None:
    async with aql_session(records_settings(tmp_path)) as aql:
        await _notes(aql)
        for n, status in enumerate(["open", "done", "open", "open"]):
            await _record(aql, {"n": n, "status": status, "text": f"note number {n}"})
        listed = await aql.call(
            "mcp_aql_read",
            "list_records",
            collection="notes",
            filter={"status": "open", "n": {"gte": 1}},
            sort={"field": "n", "order": "desc"},
            fields=["n", "status"],
        )
        found = await aql.call("mcp_aql_read", "search_records", collection="notes", query="number 3", fields="full")
        bad = await aql.call("mcp_aql_read", "list_records", collection="notes", filter={"n": {"gt": 1, "near": 2}})
    assert listed["data"]["items"] == [{"n": 3, "status": "open"}, {"n": 2, "status": "open"}]
    assert len(found["data"]["items"]) == 4  # OR semantics: "number" matches all
    # totalCount only where it costs nothing (MCP-AQL pagination §3.2): a filtered count scans the collection.
    assert "totalCount" not in found["data"]["pageInfo"]
    assert bad["error"]["code"] == "VALIDATION_INVALID_TYPE"


async def test_cursor_pagination_forward_and_backward(tmp_path: Path) -> None:
    """MCP-AQL pagination §2.2, §3."""
    async with aql_session(records_settings(tmp_path)) as aql:
        await _notes(aql)
        for n in range(5):
            await _record(aql, {"n": n})

        async def page(**params: object) -> dict[str, object]:
            result = await aql.call("mcp_aql_read", "list_records", collection="notes", fields=["n"], **params)
            return dict(result["data"])

        first = await page(first=2)
        second = await page(first=2, after=first["pageInfo"]["endCursor"])
        last = await page(last=2)
        before = await page(last=2, before=last["pageInfo"]["startCursor"])
    assert [i["n"] for i in first["items"]] == [0, 1]
    assert first["pageInfo"]["hasNextPage"] is True
    assert first["pageInfo"]["hasPreviousPage"] is False
    assert [i["n"] for i in second["items"]] == [2, 3]
    assert second["pageInfo"]["hasPreviousPage"] is True
    assert [i["n"] for i in last["items"]] == [3, 4]
    assert last["pageInfo"]["hasNextPage"] is False
    assert [i["n"] for i in before["items"]] == [1, 2]


async def test_the_store_order_listing_pages_exactly_like_the_filtered_listing(tmp_path: Path) -> None:
    """A listing without filter, search or sort is read as an index range in the store; every page,
    cursor and pageInfo flag must equal the compiled listing's (a filter matching everything), which
    only leaves out totalCount (MCP-AQL pagination §3.2: only where it costs nothing). Cursors are compared
    by the key they hold: each is also bound to its own query (docs/input.md, "Cursors")."""
    async with aql_session(records_settings(tmp_path)) as aql:
        await _notes(aql)
        made = [await _record(aql, {"n": n}) for n in range(7)]
        await aql.call("mcp_aql_delete", "delete_record", collection="notes", id=made[3]["id"])
        everything = {"n": {"exists": True}}

        async def walk(forward: bool, **extra: object) -> list[dict[str, object]]:
            pages, cursor = [], None
            for _ in range(6):
                span: dict[str, object] = {"first": 2} if forward else {"last": 2}
                if cursor is not None:
                    span["after" if forward else "before"] = cursor
                result = await aql.call(
                    "mcp_aql_read", "list_records", collection="notes", fields=["n"], **span, **extra
                )
                info = result["data"]["pageInfo"]
                keys = {k: cursor_key(v) if k.endswith("Cursor") else v for k, v in info.items() if k != "totalCount"}
                pages.append({**result["data"], "pageInfo": keys})
                if not info["hasNextPage" if forward else "hasPreviousPage"]:
                    break
                cursor = info["endCursor" if forward else "startCursor"]
            return pages

        for forward in (True, False):
            assert await walk(forward) == await walk(forward, filter=everything)
        beyond = await aql.call("mcp_aql_read", "list_records", collection="notes", first=2, after=made[6]["id"])
        forward_pages = await walk(True)
        plain = await aql.call("mcp_aql_read", "list_records", collection="notes", first=2)
    assert [[item["n"] for item in page["items"]] for page in forward_pages] == [[0, 1], [2, 4], [5, 6]]
    assert plain["data"]["pageInfo"]["totalCount"] == 6
    assert beyond["error"]["code"] == "VALIDATION_INVALID_TYPE"


@pytest.mark.parametrize(
    "params",
    [{"first": 1, "last": 1}, {"after": "x"}, {"before": "x"}, {"first": 1, "before": "x"}, {"last": 1, "after": "x"}],
)
async def test_invalid_pagination_combinations_are_refused(tmp_path: Path, params: dict[str, object]) -> None:
    """MCP-AQL pagination §2.3."""
    async with aql_session(records_settings(tmp_path)) as aql:
        await _notes(aql)
        result = await aql.call("mcp_aql_read", "list_records", collection="notes", **params)
    assert result["error"]["code"] == "VALIDATION_INVALID_TYPE"
    assert result["error"]["details"]["param_name"] == "pagination"


async def test_oversize_page_is_clamped_and_a_bad_cursor_is_refused(tmp_path: Path) -> None:
    async with aql_session(records_settings(tmp_path, aql={"max_page_size": 2})) as aql:
        await _notes(aql)
        for n in range(3):
            await _record(aql, {"n": n})
        clamped = await aql.call("mcp_aql_read", "list_records", collection="notes", first=50)
        bad = await aql.call("mcp_aql_read", "list_records", collection="notes", first=1, after="garbage")
    assert len(clamped["data"]["items"]) == 2
    assert bad["error"]["code"] == "VALIDATION_INVALID_TYPE"


async def test_a_result_over_the_size_limit_returns_fewer_items_with_a_warning(tmp_path: Path) -> None:
    async with aql_session(records_settings(tmp_path, limits={"max_result_bytes": 4096})) as aql:
        await _notes(aql)
        for n in range(6):
            await _record(aql, {"n": n, "pad": "p" * 300})
        page = await aql.call("mcp_aql_read", "list_records", collection="notes", first=6)
        created = await aql.call("mcp_aql_create", "create_record", collection="notes", data={"pad": "q" * 3000})
        big = created["data"]
        single = await aql.call("mcp_aql_read", "get_record", collection="notes", id=big["id"])
    assert 0 < len(page["data"]["items"]) < 6
    assert page["warnings"][0]["code"] == "VALIDATION_TRUNCATED_WARNING"
    assert page["data"]["pageInfo"]["hasNextPage"] is True
    assert created["warnings"][0]["code"] == "VALIDATION_TRUNCATED_WARNING"
    assert "pad" not in big
    assert single["error"]["code"] == "VALIDATION_PAYLOAD_TOO_LARGE"
    assert single["error"]["details"]["limit_type"] == "response_size"


async def test_batch_runs_in_order_with_independent_results(tmp_path: Path) -> None:
    """MCP-AQL operations §7.3."""
    async with aql_session(records_settings(tmp_path)) as aql:
        await _notes(aql)
        result = await aql.batch(
            "mcp_aql_create",
            [
                {"operation": "create_record", "params": {"collection": "notes", "data": {"a": 1}}},
                {"operation": "create_record", "params": {"collection": "missing", "data": {"a": 2}}},
                {"operation": "list_records", "params": {"collection": "notes"}},
                {"operation": "create_record", "params": {"collection": "notes", "data": {"a": 3}}},
            ],
        )
    assert result["summary"] == {"total": 4, "succeeded": 2, "failed": 2}
    assert [r["index"] for r in result["results"]] == [0, 1, 2, 3]
    assert result["results"][2]["result"]["error"]["code"] == "VALIDATION_ENDPOINT_MISMATCH"


async def test_batch_over_the_cap_or_empty_is_a_batch_level_failure(tmp_path: Path) -> None:
    async with aql_session(records_settings(tmp_path, aql={"max_batch_size": 2})) as aql:
        item = {"operation": "list_collections"}
        over = await aql.batch("mcp_aql_read", [item, item, item])
        empty = await aql.batch("mcp_aql_read", [])
    assert over["error"]["code"] == "VALIDATION_PAYLOAD_TOO_LARGE"
    assert empty["error"]["code"] == "VALIDATION_INVALID_TYPE"


async def test_batch_halts_at_a_confirmation_gated_item(tmp_path: Path) -> None:
    """MCP-AQL operations §7.5.2."""
    async with aql_session(records_settings(tmp_path)) as aql:
        await _notes(aql)
        await aql.call("mcp_aql_create", "create_collection", collection="old")
        record = await _record(aql, {"a": 1})
        result = await aql.batch(
            "mcp_aql_delete",
            [
                {"operation": "delete_record", "params": {"collection": "notes", "id": record["id"]}},
                {"operation": "delete_collection", "params": {"collection": "old"}},
                {"operation": "delete_collection", "params": {"collection": "notes"}},
            ],
        )
    assert result["summary"] == {"total": 3, "succeeded": 1, "failed": 0, "halted": 1, "pending": 1}
    assert result["halted_at"]["result"]["error"]["code"] == "CONFIRMATION_REQUIRED"
    assert result["pending_operations"] == [
        {"index": 2, "operation": "delete_collection", "params": {"collection": "notes"}}
    ]


async def test_list_collections_pages_by_name_with_cursors_and_a_total(tmp_path: Path) -> None:
    """MCP-AQL pagination §2-§4: first/after forward, last/before back, totalCount; other tenants unseen."""
    async with aql_session(records_settings(tmp_path)) as aql:
        for name in ("delta", "alpha", "echo", "charlie", "bravo"):
            await aql.call("mcp_aql_create", "create_collection", collection=name)
        bob = await aql.as_user("bob")
        await bob.call("mcp_aql_create", "create_collection", collection="zulu")
        first = await aql.call("mcp_aql_read", "list_collections", first=2)
        after = first["data"]["pageInfo"]["endCursor"]
        rest = await aql.call("mcp_aql_read", "list_collections", first=10, after=after)
        before = rest["data"]["pageInfo"]["startCursor"]
        back = await aql.call("mcp_aql_read", "list_collections", last=1, before=before)
        mixed = await aql.call("mcp_aql_read", "list_collections", first=1, before=before)
        forged = await aql.call("mcp_aql_read", "list_collections", first=1, after="bm90IGEgY3Vyc29y")
    names = [[c["name"] for c in page["data"]["items"]] for page in (first, rest, back)]
    assert names == [["alpha", "bravo"], ["charlie", "delta", "echo"], ["bravo"]]
    assert first["data"]["pageInfo"] | {"startCursor": "", "endCursor": ""} == {
        "hasNextPage": True,
        "hasPreviousPage": False,
        "totalCount": 5,
        "startCursor": "",
        "endCursor": "",
    }
    assert (rest["data"]["pageInfo"]["hasNextPage"], rest["data"]["pageInfo"]["hasPreviousPage"]) == (False, True)
    assert (back["data"]["pageInfo"]["hasNextPage"], back["data"]["pageInfo"]["hasPreviousPage"]) == (True, True)
    assert mixed["error"]["code"] == forged["error"]["code"] == "VALIDATION_INVALID_TYPE"
    assert forged["error"]["details"]["param_name"] == "after"
