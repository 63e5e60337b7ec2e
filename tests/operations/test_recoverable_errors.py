"""`aql.recoverable_errors`: a recoverable failure as a tool error (`isError: true`, MCP 2025-11-25
tools, the default) or as a result whose envelope says `success: false` (MCP-AQL mcp-integration
§4.1); any other failure is `isError: true` either way (issue 22, item 5; docs/aql.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from aql_mcp.operations.results import RECOVERABLE, failure, is_error, success, to_tool_result
from aql_mcp.plugin import Call, NoParams, Operation, PluginOperations
from aql_mcp.settings import Settings
from tests.operations.client import RECORDS, Aql, aql_session, records_settings
from tests.operations.envelope import check_result
from tests.support.asgi import rpc

pytestmark = pytest.mark.anyio
MISSING_RECORD = "rec_0123456789abcdef0123"


class _Exploding:
    """A plugin whose one operation fails unexpectedly: an internal error, never recoverable."""

    name = "boom"
    trust = "certified"

    def register_operations(self, operations: PluginOperations) -> None:
        async def explode(params: NoParams, call: Call) -> None:
            raise RuntimeError("secret /etc/passwd detail")

        operations.add(Operation("explode_now", "READ", "Fails.", explode))


exploding = _Exploding()
EXPLODING = f"{__name__}:exploding"


def _settings(state: Path, mode: str | None) -> Settings:
    aql = {"recoverable_errors": mode} if mode else {}
    return records_settings(state, aql={**aql, "max_batch_size": 2}, server={"plugins": [RECORDS, EXPLODING]})


async def _tool(aql: Aql, tool: str, arguments: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    """`isError` of the `tools/call` result, and its envelope (the same in content and structuredContent)."""
    body = rpc("tools/call", {"name": tool, "arguments": arguments})
    response = await aql.http.post("/mcp", json=body, headers=aql.headers)
    assert response.status_code == 200, response.text
    result = response.json()["result"]
    envelope = result["structuredContent"]
    assert json.loads(result["content"][0]["text"]) == envelope
    return bool(result.get("isError", False)), check_result(envelope) if "results" not in envelope else envelope


async def _answers(state: Path, mode: str | None) -> dict[str, tuple[bool, dict[str, Any]]]:
    """One call per kind of failure, and a success, under the mode given (None: the default)."""
    async with aql_session(_settings(state, mode)) as aql:
        await aql.call("mcp_aql_create", "create_collection", collection="notes")
        read, delete = "mcp_aql_read", "mcp_aql_delete"
        return {
            "unknown_param": await _tool(aql, read, {"operation": "list_records", "collection": "notes", "x": 1}),
            "missing_param": await _tool(aql, read, {"operation": "list_records"}),
            "invalid_type": await _tool(aql, read, {"operation": "list_records", "collection": 7}),
            "unknown_operation": await _tool(aql, read, {"operation": "no_such_thing"}),
            "not_found": await _tool(
                aql, read, {"operation": "get_record", "collection": "notes", "id": MISSING_RECORD}
            ),
            "confirmation": await _tool(aql, delete, {"operation": "delete_collection", "collection": "notes"}),
            "internal": await _tool(aql, read, {"operation": "explode_now"}),
            "batch_too_large": await _tool(aql, read, {"operations": [{"operation": "introspect"}] * 3}),
            "ok": await _tool(aql, read, {"operation": "list_records", "collection": "notes"}),
            "batch": await _tool(aql, read, {"operations": [{"operation": "no_such_thing"}]}),
        }


RECOVERED = {"unknown_param", "missing_param", "invalid_type", "unknown_operation", "not_found", "confirmation"}
CODES = {
    "unknown_param": "VALIDATION_UNKNOWN_PARAM",
    "missing_param": "VALIDATION_MISSING_PARAM",
    "invalid_type": "VALIDATION_INVALID_TYPE",
    "unknown_operation": "NOT_FOUND_OPERATION",
    "not_found": "NOT_FOUND_RESOURCE",
    "confirmation": "CONFIRMATION_REQUIRED",
    "internal": "INTERNAL_ERROR",
    "batch_too_large": "VALIDATION_PAYLOAD_TOO_LARGE",
}


@pytest.mark.parametrize("mode", [None, "tool_error"])
async def test_tool_error_answers_every_failure_with_is_error_true(tmp_path: Path, mode: str | None) -> None:
    answers = await _answers(tmp_path, mode)
    assert {kind: envelope["error"]["code"] for kind, (_, envelope) in answers.items() if kind in CODES} == CODES
    assert {kind for kind, (flag, _) in answers.items() if flag} == set(CODES)


async def test_result_answers_recoverable_failures_with_is_error_false_and_success_false(tmp_path: Path) -> None:
    answers = await _answers(tmp_path, "result")
    assert {kind: envelope["error"]["code"] for kind, (_, envelope) in answers.items() if kind in CODES} == CODES
    assert {kind for kind, (flag, _) in answers.items() if flag} == set(CODES) - RECOVERED
    assert all(answers[kind][1]["success"] is False for kind in RECOVERED)
    assert (answers["ok"][0], answers["ok"][1]["success"]) == (False, True)
    assert answers["batch"][1]["results"][0]["result"]["success"] is False


def test_the_recoverable_codes_are_mcp_aqls_list_and_nothing_else_is() -> None:
    listed = {
        "NOT_FOUND_RESOURCE",
        "NOT_FOUND_OPERATION",
        "VALIDATION_MISSING_PARAM",
        "VALIDATION_INVALID_TYPE",
        "VALIDATION_INVALID_VALUE",
        "PERMISSION_DENIED",
        "RATE_LIMIT_EXCEEDED",
        "RATE_LIMIT_QUOTA_PAUSE",
        "CONFIRMATION_REQUIRED",
    }
    assert listed | {"VALIDATION_UNKNOWN_PARAM"} == RECOVERABLE
    for code in sorted(RECOVERABLE):
        assert is_error(failure(code, "x")) is True
        assert is_error(failure(code, "x"), recoverable_as_result=True) is False
    for code in ("INTERNAL_ERROR", "VALIDATION_PAYLOAD_TOO_LARGE", "TOKEN_INVALID", "CONFLICT_ALREADY_EXISTS"):
        assert is_error(failure(code, "x"), recoverable_as_result=True) is True
    assert "isError" not in to_tool_result(failure("NOT_FOUND_RESOURCE", "x"), recoverable_as_result=True).to_wire()
    assert "isError" not in to_tool_result(success(1)).to_wire()
