"""The MCP-AQL router through tools/call: envelope, validation codes, endpoint families, modes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aql_mcp.auth.dev_issuer import DevIssuer
from aql_mcp.exceptions import ConfigError, IntrospectionBudgetSpent, ShuttingDown, StoreError
from aql_mcp.operations.models import Operation
from aql_mcp.operations.service import PluginOperations
from aql_mcp.plugin_host.loader import load_plugins
from aql_mcp.protocol.primitives import Registry
from aql_mcp.store.sqlite.store import SqliteStore
from tests.operations.client import RECORDS, aql_session, records_settings
from tests.support.asgi import MCP_HEADERS, asgi_client, initialize_params, rpc


def bearer(token: str) -> dict[str, str]:
    return {**MCP_HEADERS, "authorization": f"Bearer {token}"}


pytestmark = pytest.mark.anyio


async def test_semantic_mode_registers_the_crude_tools_with_open_schemas_and_annotations(tmp_path: Path) -> None:
    async with aql_session(records_settings(tmp_path)) as aql:
        tools = {t["name"]: t for t in await aql.tools() if t["name"].startswith("mcp_aql")}
    assert set(tools) == {"mcp_aql_create", "mcp_aql_read", "mcp_aql_update", "mcp_aql_delete"}
    for tool in tools.values():
        assert {"operation", "params", "operations"} <= set(tool["inputSchema"]["properties"])
        assert tool["inputSchema"].get("additionalProperties", True) is not False
        assert "introspect" in tool["description"]
    assert tools["mcp_aql_read"]["annotations"]["readOnlyHint"] is True
    assert tools["mcp_aql_delete"]["annotations"]["destructiveHint"] is True
    assert "Risk:" in tools["mcp_aql_delete"]["description"]
    assert "delete_collection" in tools["mcp_aql_delete"]["description"]


async def test_single_mode_registers_one_tool_that_routes_every_operation(tmp_path: Path) -> None:
    async with aql_session(records_settings(tmp_path, aql={"mode": "single"})) as aql:
        names = {t["name"] for t in await aql.tools() if t["name"].startswith("mcp_aql")}
        listing = await aql.call("mcp_aql", "introspect", query="operations")
        created = await aql.call("mcp_aql", "create_collection", collection="notes")
        detail = await aql.call("mcp_aql", "introspect", query="operations", name="create_record")
    assert names == {"mcp_aql"}
    assert listing["data"]["_protocol"]["mode"] == "single"
    assert created["success"] is True
    assert detail["data"]["operation"]["mcpTool"] == "mcp_aql"


async def test_all_mode_reports_the_semantic_family_and_the_single_tool_accepts_everything(tmp_path: Path) -> None:
    async with aql_session(records_settings(tmp_path, aql={"mode": "all"})) as aql:
        names = {t["name"] for t in await aql.tools() if t["name"].startswith("mcp_aql")}
        detail = await aql.call("mcp_aql", "introspect", query="operations", name="create_record")
        created = await aql.call("mcp_aql", "create_collection", collection="notes")
    assert "mcp_aql" in names
    assert "mcp_aql_create" in names
    assert detail["data"]["operation"]["endpoint"] == "create"
    assert detail["data"]["operation"]["mcpTool"] == "mcp_aql_create"
    assert created["success"] is True


async def test_dqmo_profile_maps_categories_to_discover_query_manage_operate(tmp_path: Path) -> None:
    async with aql_session(records_settings(tmp_path, aql={"profile": "dqmo"})) as aql:
        names = {t["name"] for t in await aql.tools() if t["name"].startswith("mcp_aql")}
        listing = await aql.call("mcp_aql_discover", "introspect", query="operations")
    endpoints = {op["name"]: op["endpoint"] for op in listing["data"]["operations"]}
    assert names == {"mcp_aql_discover", "mcp_aql_query", "mcp_aql_manage"}
    assert endpoints["introspect"] == "discover"
    assert endpoints["list_records"] == "query"
    assert endpoints["create_record"] == endpoints["delete_record"] == "manage"
    assert listing["data"]["_protocol"]["families"]["manage"]["categories"] == ["CREATE", "UPDATE", "DELETE"]


async def test_introspection_lists_operations_with_protocol_metadata(tmp_path: Path) -> None:
    """MCP-AQL §7; MCP-AQL introspection §4.1.1: _protocol with version, level-2, mode, profile, limits."""
    async with aql_session(records_settings(tmp_path)) as aql:
        listing = await aql.call("mcp_aql_read", "introspect", query="operations")
    protocol = listing["data"]["_protocol"]
    assert protocol["conformance"] == "level-2"
    assert (protocol["mode"], protocol["profile"]) == ("semantic", "crude")
    assert protocol["limits"]["max_nesting_depth"] == 32
    assert protocol["capabilities"]["batch"] is True
    assert "concurrency" in protocol
    names = [op["name"] for op in listing["data"]["operations"]]
    assert {"introspect", "create_record", "delete_collection"} <= set(names)


async def test_introspection_of_every_operation_and_type_validates(tmp_path: Path) -> None:
    async with aql_session(records_settings(tmp_path)) as aql:
        listing = await aql.call("mcp_aql_read", "introspect", query="operations")
        for op in listing["data"]["operations"]:
            detail = await aql.call("mcp_aql_read", "introspect", query="operations", name=op["name"])
            assert detail["data"]["operation"]["name"] == op["name"]
        types = await aql.call("mcp_aql_read", "introspect", query="types")
        for summary in types["data"]["types"]:
            detail = await aql.call("mcp_aql_read", "introspect", query="types", name=summary["name"])
            assert detail["data"]["type"]["kind"] == summary["kind"]


async def test_introspecting_an_unknown_name_answers_null(tmp_path: Path) -> None:
    async with aql_session(records_settings(tmp_path)) as aql:
        operation = await aql.call("mcp_aql_read", "introspect", query="operations", name="nope")
        type_ = await aql.call("mcp_aql_read", "introspect", query="types", name="Nope")
    assert operation["data"] == {"operation": None}
    assert type_["data"] == {"type": None}


async def test_operation_details_state_the_danger_level_and_parameters(tmp_path: Path) -> None:
    async with aql_session(records_settings(tmp_path)) as aql:
        detail = await aql.call("mcp_aql_read", "introspect", query="operations", name="delete_collection")
    op = detail["data"]["operation"]
    assert "dangerous" in op["description"]
    assert op["permissions"] == {"readOnly": False, "destructive": True}
    assert op["parameters"][0]["name"] == "collection"
    assert op["parameters"][0]["required"] is True


async def test_unknown_operation_is_not_found_with_the_available_ones(tmp_path: Path) -> None:
    async with aql_session(records_settings(tmp_path)) as aql:
        result = await aql.call("mcp_aql_read", "get_users")
    assert result["error"]["code"] == "NOT_FOUND_OPERATION"
    assert "list_records" in result["error"]["details"]["available"]


async def test_operation_sent_to_the_wrong_family_is_an_endpoint_mismatch(tmp_path: Path) -> None:
    async with aql_session(records_settings(tmp_path)) as aql:
        result = await aql.call("mcp_aql_create", "list_records", collection="notes")
    assert result["error"]["code"] == "VALIDATION_ENDPOINT_MISMATCH"
    assert result["error"]["details"]["expected_tool"] == "mcp_aql_read"


async def test_unknown_parameter_names_the_unknown_and_the_valid_ones(tmp_path: Path) -> None:
    """MCP-AQL §4.6."""
    async with aql_session(records_settings(tmp_path)) as aql:
        result = await aql.call("mcp_aql_create", "create_collection", collection="notes", force_create=True)
    details = result["error"]["details"]
    assert result["error"]["code"] == "VALIDATION_UNKNOWN_PARAM"
    assert details["unknown_params"] == ["force_create"]
    assert "collection" in details["valid_params"]


async def test_top_level_parameters_are_resolved_and_params_wins(tmp_path: Path) -> None:
    """MCP-AQL §4.2: params.<name> first, then top-level <name>; _-prefixed metadata is exempt."""
    async with aql_session(records_settings(tmp_path)) as aql:
        top = await aql.raw("mcp_aql_create", {"operation": "create_collection", "collection": "a", "_meta_x": 1})
        both = await aql.raw(
            "mcp_aql_create", {"operation": "create_collection", "collection": "zz", "params": {"collection": "b"}}
        )
        unknown = await aql.raw("mcp_aql_create", {"operation": "create_collection", "collection": "c", "bogus": 1})
    assert top["data"]["name"] == "a"
    assert both["data"]["name"] == "b"
    assert unknown["error"]["code"] == "VALIDATION_UNKNOWN_PARAM"


async def test_missing_parameter_and_missing_operation_are_missing_param(tmp_path: Path) -> None:
    async with aql_session(records_settings(tmp_path)) as aql:
        missing = await aql.call("mcp_aql_create", "create_collection")
        no_operation = await aql.raw("mcp_aql_read", {"params": {}})
    assert missing["error"]["code"] == "VALIDATION_MISSING_PARAM"
    assert missing["error"]["details"]["param_name"] == "collection"
    assert no_operation["error"]["code"] == "VALIDATION_MISSING_PARAM"


@pytest.mark.parametrize(
    "arguments",
    [
        {"operation": "create_collection", "params": {"collection": 5}},
        {"operation": "create_collection", "params": "collection=notes"},
        {"operation": 7},
    ],
)
async def test_wrong_types_are_invalid_type(tmp_path: Path, arguments: dict[str, object]) -> None:
    async with aql_session(records_settings(tmp_path)) as aql:
        result = await aql.raw("mcp_aql_create", arguments)
    assert result["error"]["code"] == "VALIDATION_INVALID_TYPE"
    assert {"param_name", "expected_type", "actual_type"} <= set(result["error"]["details"])


@pytest.mark.parametrize("value", ["a\u0000b", "x\uffff", "\ufffe"])
async def test_unclean_text_is_invalid_encoding(tmp_path: Path, value: str) -> None:
    """MCP-AQL §4.7.1: what survives JSON parsing but is not clean text."""
    async with aql_session(records_settings(tmp_path)) as aql:
        result = await aql.call("mcp_aql_create", "create_collection", collection="notes", description=value)
    assert result["error"]["code"] == "VALIDATION_INVALID_ENCODING"


async def test_a_lone_surrogate_escape_is_refused_at_the_transport_as_a_parse_error(tmp_path: Path) -> None:
    """Records issue: what is not UTF-8 text never reaches the router: HTTP 400, -32700."""
    async with aql_session(records_settings(tmp_path)) as aql:
        body = rpc("tools/call", {"name": "mcp_aql_read", "arguments": {"operation": "x", "params": {"v": "\ud800"}}})
        response = await aql.http.post("/mcp", content=json.dumps(body), headers=aql.headers)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32700


@pytest.mark.parametrize(
    ("limits", "value", "kind"),
    [
        ({"max_string_length": 100}, "x" * 101, "string_length"),
        ({"max_array_elements": 3}, [1, 2, 3, 4], "array_elements"),
        ({"max_nesting_depth": 4}, {"a": {"b": {"c": {}}}}, "nesting_depth"),
    ],
)
async def test_payload_limits_are_payload_too_large_naming_the_limit(
    tmp_path: Path, limits: dict[str, int], value: object, kind: str
) -> None:
    """MCP-AQL §4.7.5, with lowered limits so the 1 MB body limit does not answer first."""
    async with aql_session(records_settings(tmp_path, aql=limits)) as aql:
        result = await aql.call("mcp_aql_create", "create_record", collection="notes", data={"v": value})
    assert result["error"]["code"] == "VALIDATION_PAYLOAD_TOO_LARGE"
    assert result["error"]["details"]["limit_type"] == kind


async def _explode(params: object, call: object) -> None:
    raise RuntimeError("secret /etc/passwd detail")


async def _noop(params: object, call: object) -> dict[str, object]:
    return {}


class _OpsPlugin:
    """An operations plugin made of one operation, loaded by import string like any other."""

    trust = "certified"

    def __init__(self, name: str, operation: Operation) -> None:
        self.name = name
        self.operation = operation

    def register_operations(self, operations: PluginOperations) -> None:
        operations.add(self.operation)


async def _stopping(params: object, call: object) -> None:
    raise ShuttingDown(retry_ms=3000)


async def _budget_spent(params: object, call: object) -> None:
    raise IntrospectionBudgetSpent(retry_after=7)


async def _store_down(params: object, call: object) -> None:
    raise StoreError("Service unavailable: the store could not complete the operation")


class _UnavailablePlugin:
    """Three operations that each fail the way a busy or stopping replica does."""

    name = "unavailable"
    trust = "certified"

    def register_operations(self, operations: PluginOperations) -> None:
        operations.add(Operation("get_stopping", "READ", "x", _stopping))
        operations.add(Operation("get_budget", "READ", "x", _budget_spent))
        operations.add(Operation("get_store", "READ", "x", _store_down))


exploding = _OpsPlugin("boom", Operation("explode_now", "READ", "Fails.", _explode))
unavailable = _UnavailablePlugin()
first_thing = _OpsPlugin("first", Operation("get_thing", "READ", "x", _noop))
second_thing = _OpsPlugin("second", Operation("get_thing", "READ", "x", _noop))
reserved = _OpsPlugin("mine", Operation("confirm_operation", "EXECUTE", "x", _noop))
HERE = __name__


async def test_an_unexpected_failure_is_internal_error_without_internals(tmp_path: Path) -> None:
    settings = records_settings(tmp_path, server={"plugins": [RECORDS, f"{HERE}:exploding"]})
    async with aql_session(settings) as aql:
        result = await aql.raw("mcp_aql_read", {"operation": "explode_now"})
    assert result["error"]["code"] == "INTERNAL_ERROR"
    assert "passwd" not in str(result)
    assert "RuntimeError" not in str(result)


def test_a_duplicate_operation_fails_at_startup_naming_both_plugins(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"first.*second"):
        load_plugins([f"{HERE}:first_thing", f"{HERE}:second_thing"], Registry(), None, SqliteStore(tmp_path / "s"))


def test_a_reserved_operation_name_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="reserved"):
        load_plugins([f"{HERE}:reserved"], Registry(), None, SqliteStore(tmp_path / "s"))


async def test_a_missing_scope_for_an_operation_or_its_family_is_permission_denied_naming_it(tmp_path: Path) -> None:
    """Security issue: finer authorization is answered in-band; an MCP-AQL refusal is PERMISSION_DENIED
    naming the missing scope, whichever tool the operation arrives through (`all` mode here)."""
    policy = {"operations": {"create_record": ["records:write"]}, "families": {"delete": ["records:admin"]}}
    settings = records_settings(tmp_path, auth={"policy": policy}, aql={"mode": "all"})
    async with aql_session(settings) as aql:
        await aql.call("mcp_aql_create", "create_collection", collection="notes")
        create = await aql.call("mcp_aql", "create_record", collection="notes", data={"a": 1})
        delete = await aql.call("mcp_aql", "delete_record", collection="notes", id="rec_0123456789abcdef0123")
        listed = await aql.call("mcp_aql", "list_records", collection="notes")
        writer = await aql.as_user("alice", ("mcp", "records:write"))
        allowed = await writer.call("mcp_aql_create", "create_record", collection="notes", data={"a": 1})
    assert create["error"]["code"] == "PERMISSION_DENIED"
    assert create["error"]["details"]["required_scope"] == "records:write"
    assert delete["error"]["code"] == "PERMISSION_DENIED"
    assert delete["error"]["details"]["required_scope"] == "records:admin"
    assert listed["success"] is True
    assert allowed["success"] is True


@pytest.mark.parametrize(
    ("aql", "tool"), [({}, "mcp_aql_read"), ({"profile": "dqmo"}, "mcp_aql_discover"), ({"mode": "single"}, "mcp_aql")]
)
async def test_the_initialize_instructions_say_how_to_discover_operations(
    tmp_path: Path, aql: dict[str, str], tool: str
) -> None:
    settings = records_settings(tmp_path, aql=aql)
    async with asgi_client(settings) as http:
        token = DevIssuer(state_dir=settings.store.path, issuer=settings.issuer, audience=settings.audience).mint(
            subject="alice", scopes=["mcp"], ttl=60
        )
        answer = await http.post("/mcp", json=rpc("initialize", initialize_params()), headers=bearer(token))
    instructions = answer.json()["result"]["instructions"]
    assert f"call {tool} with" in instructions
    assert '"introspect"' in instructions


async def test_an_unavailable_batch_item_reports_its_own_reason_and_when_to_retry(tmp_path: Path) -> None:
    """Issue 12: a batch item that meets a shutdown or a spent budget says so, not "store unavailable"."""
    settings = records_settings(tmp_path, server={"plugins": [RECORDS, f"{HERE}:unavailable"]})
    names = ("get_stopping", "get_budget", "get_store")
    async with aql_session(settings) as aql:
        result = await aql.batch("mcp_aql_read", [{"operation": name} for name in names])
    errors = {item["operation"]: item["result"]["error"] for item in result["results"]}
    assert result["summary"] == {"total": 3, "succeeded": 0, "failed": 3}
    assert {error["code"] for error in errors.values()} == {"INTERNAL_ERROR"}
    assert [errors[name]["details"]["retryAfter"] for name in names] == [3, 7, StoreError.RETRY_AFTER]
    assert all(error["details"]["retryable"] is True for error in errors.values())
    assert all(error["details"]["request_id"] for error in errors.values())
    assert len({errors[name]["message"] for name in names}) == 3
