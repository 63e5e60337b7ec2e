"""Issue 22, item 4: every operation's introspection says one thing about its danger. The level its
description states and its `permissions` agree (MCP-AQL danger levels §2.2: `destructive` and above
remove or irreversibly change state), for every operation of the built-in plugins."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from aql_mcp.operations.models import DANGER_LEVELS
from tests.operations.client import aql_session
from tests.support.asgi import dev_settings

pytestmark = pytest.mark.anyio
STATED = re.compile(r"Danger level: (\w+) \(")


async def test_every_operations_description_and_permissions_agree(tmp_path: Path) -> None:
    async with aql_session(dev_settings(tmp_path)) as aql:
        listing = await aql.call("mcp_aql_read", "introspect", query="operations")
        names = [op["name"] for op in listing["data"]["operations"]]
        details = [
            (await aql.call("mcp_aql_read", "introspect", query="operations", name=name))["data"]["operation"]
            for name in names
        ]
    # The built-ins: records, executions and safety (docs/mcp-aql-conformance.md).
    assert len(names) == 26
    assert {"execute_import", "execute_agent", "abort_execution", "delete_collection"} <= set(names)
    for detail in details:
        stated = STATED.search(detail["description"])
        assert stated is not None, detail["name"]
        level = stated.group(1)
        destructive = DANGER_LEVELS.index(level) >= DANGER_LEVELS.index("destructive")
        assert detail["permissions"]["destructive"] is destructive, (detail["name"], level)
        assert detail["permissions"]["readOnly"] is (detail["endpoint"] in ("read", "discover", "query")), detail


async def test_an_import_is_reversible_and_not_destructive(tmp_path: Path) -> None:
    """An import only adds records (MCP-AQL danger levels §2.2.2: creating is reversible)."""
    async with aql_session(dev_settings(tmp_path)) as aql:
        detail = await aql.call("mcp_aql_read", "introspect", query="operations", name="execute_import")
    operation = detail["data"]["operation"]
    assert "Danger level: reversible" in operation["description"]
    assert operation["permissions"] == {"readOnly": False, "destructive": False}
