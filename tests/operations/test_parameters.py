"""Parameter validation errors say what is allowed; the confirmation token is a parameter only where
the gatekeeper can ask for it (MCP-AQL §4.6, MCP-AQL error codes §4, issue 12)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import Field, field_validator

from aql_mcp.operations.models import Call, Operation, Params
from aql_mcp.operations.parameters import validate
from aql_mcp.operations.results import OperationError
from tests.operations.client import aql_session, records_settings

pytestmark = pytest.mark.anyio


async def test_an_enum_violation_lists_the_allowed_values(tmp_path: Path) -> None:
    async with aql_session(records_settings(tmp_path)) as aql:
        result = await aql.call("mcp_aql_read", "introspect", query="everything")
    # introspect's failure shape has no details: the message carries the values.
    assert result["error"]["code"] == "VALIDATION_INVALID_TYPE"
    assert '"operations"' in result["error"]["message"]
    assert '"types"' in result["error"]["message"]


async def test_a_nested_enum_violation_lists_the_allowed_values_in_details(tmp_path: Path) -> None:
    async with aql_session(records_settings(tmp_path)) as aql:
        await aql.call("mcp_aql_create", "create_collection", collection="notes")
        result = await aql.call(
            "mcp_aql_read", "list_records", collection="notes", sort={"field": "a", "order": "sideways"}
        )
    details = result["error"]["details"]
    assert result["error"]["code"] == "VALIDATION_INVALID_TYPE"
    assert details["param_name"] == "sort.order"
    assert details["allowed_values"] == ["asc", "desc"]
    assert '"asc"' in result["error"]["message"]


async def test_a_pattern_violation_names_the_pattern(tmp_path: Path) -> None:
    async with aql_session(records_settings(tmp_path)) as aql:
        result = await aql.call("mcp_aql_create", "create_collection", collection="Not A Name")
    details = result["error"]["details"]
    assert result["error"]["code"] == "VALIDATION_INVALID_TYPE"
    assert details["param_name"] == "collection"
    assert details["pattern"] == "^[a-z][a-z0-9_-]{0,63}$"
    assert details["pattern"] in result["error"]["message"]
    assert "Not A Name" not in str(result)


async def test_a_confirmable_operation_lists_confirmation_token_among_its_valid_parameters(tmp_path: Path) -> None:
    async with aql_session(records_settings(tmp_path)) as aql:
        gated = await aql.call("mcp_aql_delete", "delete_collection", collection="notes", bogus=1)
        plain = await aql.call("mcp_aql_delete", "delete_record", collection="notes", id="x", _confirmation="t")
    assert gated["error"]["code"] == "VALIDATION_UNKNOWN_PARAM"
    assert gated["error"]["details"]["valid_params"] == ["collection", "confirmation_token"]
    # delete_record is `destructive`, which the built-in trust runs without confirmation.
    assert plain["error"]["code"] == "VALIDATION_UNKNOWN_PARAM"
    assert plain["error"]["details"]["unknown_params"] == ["_confirmation"]


async def test_other_underscore_metadata_is_still_ignored(tmp_path: Path) -> None:
    """§4.6.1: `_meta`-style fields are not parameters; only the token's alias is special."""
    async with aql_session(records_settings(tmp_path)) as aql:
        result = await aql.call("mcp_aql_read", "list_collections", _request_id="r-1")
    assert result["success"] is True


async def test_a_token_of_the_wrong_type_on_a_confirmable_operation_is_invalid_type(tmp_path: Path) -> None:
    async with aql_session(records_settings(tmp_path)) as aql:
        result = await aql.call("mcp_aql_delete", "delete_collection", collection="notes", confirmation_token=7)
    assert result["error"]["code"] == "VALIDATION_INVALID_TYPE"
    assert result["error"]["details"]["param_name"] == "confirmation_token"


class Secret(Params):
    code: str = Field(description="A code.", json_schema_extra={"sensitive": True})
    label: str = Field(default="x", description="A label.")

    @field_validator("code", "label")
    @classmethod
    def known(cls, value: str) -> str:
        if value.startswith("bad"):
            raise ValueError(f"unknown value {value}")
        return value


async def reveal(params: Secret, call: Call) -> str:
    return "never"


def test_a_validators_message_on_a_sensitive_parameter_is_left_out() -> None:
    """MCP-AQL error codes §4: never the rejected value of a sensitive parameter, even in the words
    of the parameter's own validator; a plain parameter keeps its validator's explanation."""
    operation = Operation("reveal", "READ", "Reveal.", reveal, Secret)
    with pytest.raises(OperationError) as hidden:
        validate(operation, {"code": "bad-hunter2"})
    with pytest.raises(OperationError) as shown:
        validate(operation, {"code": "ok", "label": "bad-label"})
    assert hidden.value.code == shown.value.code == "VALIDATION_INVALID_TYPE"
    assert hidden.value.details["param_name"] == "code"
    assert "hunter2" not in f"{hidden.value} {hidden.value.details}"
    assert "bad-label" in shown.value.details["constraint"]
