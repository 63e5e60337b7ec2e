"""MCP-AQL attacks on a real `aql-mcp serve` (issue 12): a scope rule bypassed through another tool,
a confirmation token where nothing can be confirmed, and a plugin that grants itself `certified`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support.aql import session
from tests.support.self_certified import NAME as SELF_CERTIFIED
from tests.support.server import start_server

PLUGIN = "tests.support.self_certified:plugin"


def _denied(envelope: dict[str, Any], scope: str) -> None:
    assert envelope["success"] is False
    assert envelope["error"]["code"] == "PERMISSION_DENIED"
    assert envelope["error"]["details"]["required_scope"] == scope


def test_a_scope_rule_on_a_family_tool_binds_its_operations_through_mcp_aql_and_batches(tmp_path: Path) -> None:
    """Issue 12: in `all` mode a rule on `mcp_aql_delete` was bypassed by sending delete_record
    through `mcp_aql`; policy follows the operation, whatever tool (or batch) carries it."""
    env = {"AQL_MCP_AQL__MODE": "all", "AQL_MCP_AUTH__POLICY__TOOLS": json.dumps({"mcp_aql_delete": ["records:admin"]})}
    with start_server(tmp_path, env=env, plugins=()) as server:
        with session(server) as mallory:
            assert mallory.call("mcp_aql", "create_collection", collection="notes")["success"]
            made = mallory.call("mcp_aql", "create_record", collection="notes", data={"a": 1})["data"]
            direct = mallory.tool("mcp_aql_delete", {"operation": "delete_record", "params": {"id": made["id"]}})
            single = mallory.call("mcp_aql", "delete_record", collection="notes", id=made["id"])
            item = {"operation": "delete_record", "params": {"collection": "notes", "id": made["id"]}}
            batched = mallory.batch("mcp_aql", [item, {"operation": "list_collections"}])
            dropped = mallory.call("mcp_aql", "delete_collection", collection="notes")
            kept = mallory.call("mcp_aql", "get_record", collection="notes", id=made["id"])
        with session(server, ("mcp", "records:admin"), subject="mallory") as admin:
            allowed = admin.call("mcp_aql", "delete_record", collection="notes", id=made["id"])
    assert direct["isError"] is True
    _denied(single, "records:admin")
    _denied(batched["results"][0]["result"], "records:admin")
    assert batched["results"][1]["result"]["success"] is True
    _denied(dropped, "records:admin")
    assert kept["success"] is True
    assert allowed["success"] is True


def test_a_confirmation_token_is_refused_where_nothing_can_be_confirmed_and_documented_where_it_can(
    tmp_path: Path,
) -> None:
    """MCP-AQL §4.6 and introspection fidelity: `confirmation_token` was accepted by every operation
    and documented by none; now only operations the gatekeeper can gate take it, and say so."""
    with start_server(tmp_path, plugins=()) as server, session(server) as caller:
        assert caller.call("mcp_aql_create", "create_collection", collection="notes")["success"]
        plain = caller.call("mcp_aql_read", "list_records", collection="notes", confirmation_token="conf_x")
        meta = caller.call("mcp_aql_read", "list_records", collection="notes", _confirmation="conf_x")
        unknown = caller.call("mcp_aql_read", "list_records", collection="notes", page_size=3)
        gated = caller.details("delete_collection")
        ungated = caller.details("list_records")
        asked = caller.call("mcp_aql_delete", "delete_collection", collection="notes")
        token = asked["error"]["details"]["confirmation_token"]
        confirmed = caller.call("mcp_aql_delete", "delete_collection", collection="notes", confirmation_token=token)
    for refused, name in ((plain, "confirmation_token"), (meta, "_confirmation"), (unknown, "page_size")):
        assert refused["error"]["code"] == "VALIDATION_UNKNOWN_PARAM"
        assert refused["error"]["details"]["unknown_params"] == [name]
        assert "confirmation_token" not in refused["error"]["details"]["valid_params"]
    documented = {info["name"]: info for info in gated["parameters"]}
    assert documented["confirmation_token"]["type"] == "string"
    assert documented["confirmation_token"]["required"] is False
    assert documented["confirmation_token"]["description"]
    assert "confirmation_token" not in {info["name"] for info in ungated["parameters"]}
    assert asked["error"]["code"] == "CONFIRMATION_REQUIRED"
    assert confirmed["success"] is True


def test_a_plugin_that_declares_itself_certified_still_needs_confirmation(tmp_path: Path) -> None:
    """MCP-AQL danger levels §4.1: at `certified` a dangerous operation runs unconfirmed; a plugin's own
    word is capped by `aql.max_trust` (default community_reviewed), and the lowering is logged."""
    with start_server(tmp_path, plugins=(PLUGIN,)) as server:
        with session(server) as caller:
            purge = caller.call("mcp_aql_delete", "purge_things")
            drop = caller.call("mcp_aql_delete", "drop_thing")
            described = caller.details("purge_things")
        log = server.log_text()
    assert purge["error"]["code"] == "CONFIRMATION_REQUIRED"
    assert drop["success"] is True
    assert "confirmation_token" in {info["name"] for info in described["parameters"]}
    assert "community_reviewed" in described["description"]
    lowered = [json.loads(line) for line in log.splitlines() if "plugin_trust_changed" in line]
    assert lowered
    assert lowered[0]["plugin"] == SELF_CERTIFIED
    assert (lowered[0]["declared"], lowered[0]["effective"]) == ("certified", "community_reviewed")


def test_the_operator_sets_a_plugins_trust_above_or_below_the_cap(tmp_path: Path) -> None:
    """`aql.plugin_trust` is the operator's word: it raises a reviewed plugin past `aql.max_trust`,
    or lowers one so that even its destructive operations need confirmation."""
    raised = {"AQL_MCP_AQL__PLUGIN_TRUST": json.dumps({SELF_CERTIFIED: "certified"})}
    lowered = {"AQL_MCP_AQL__PLUGIN_TRUST": json.dumps({SELF_CERTIFIED: "validated"})}
    for state in ("raised", "lowered"):
        (tmp_path / state).mkdir()
    with start_server(tmp_path / "raised", env=raised, plugins=(PLUGIN,)) as server, session(server) as caller:
        purge = caller.call("mcp_aql_delete", "purge_things")
        refused = caller.call("mcp_aql_delete", "purge_things", confirmation_token="conf_x")
    with start_server(tmp_path / "lowered", env=lowered, plugins=(PLUGIN,)) as server, session(server) as caller:
        drop = caller.call("mcp_aql_delete", "drop_thing")
        denied = caller.call("mcp_aql_delete", "purge_things")
    assert purge["success"] is True
    assert refused["error"]["code"] == "VALIDATION_UNKNOWN_PARAM"
    assert drop["error"]["code"] == "CONFIRMATION_REQUIRED"
    assert denied["error"]["code"] == "PERMISSION_DANGER_LEVEL_DENIED"
