"""Batch items keep their warnings (MCP-AQL warnings; issue 12)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.operations.client import aql_session, records_settings

pytestmark = pytest.mark.anyio


async def test_an_items_warnings_are_kept_in_its_result(tmp_path: Path) -> None:
    async with aql_session(records_settings(tmp_path)) as aql:
        await aql.call("mcp_aql_create", "create_collection", collection="notes")
        item = {
            "operation": "create_record",
            "params": {"collection": "notes", "data": {"a": 1}, "idempotency_key": "k"},
        }
        result = await aql.raw("mcp_aql_create", {"operations": [item, item]})
    first, replay = (entry["result"] for entry in result["results"])
    assert "warnings" not in first
    assert [w["code"] for w in replay["warnings"]] == ["IDEMPOTENT_REPLAY"]
    assert replay["data"]["id"] == first["data"]["id"]
    assert result["summary"] == {"total": 2, "succeeded": 2, "failed": 0}
