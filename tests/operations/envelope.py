"""Checks written from the MCP-AQL JSON Schemas (operation-result, introspection-response, batch-operation).

The schemas are not vendored into this repository; these functions restate their rules so every
envelope a test sees can be checked: `check_result`, `check_introspection`, `check_batch`.
"""

from __future__ import annotations

import re
from typing import Any

CODE = re.compile(r"^[A-Z][A-Z0-9_]*$")
VERSION = re.compile(r"^\d+\.\d+\.\d+(-[a-zA-Z0-9.-]+)?$")
CATEGORIES = {"CREATE", "READ", "UPDATE", "DELETE", "EXECUTE"}
PARAMETER_KEYS = {
    "name",
    "type",
    "required",
    "description",
    "default",
    "enum",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "items",
    "sensitive",
}


def _keys(value: dict[str, Any], allowed: set[str], required: set[str]) -> None:
    assert isinstance(value, dict), value
    assert set(value) <= allowed, set(value) - allowed
    assert required <= set(value), required - set(value)


def _error(error: dict[str, Any], *, details: bool = True) -> None:
    _keys(error, {"code", "message", "details"} if details else {"code", "message"}, {"code", "message"})
    assert CODE.fullmatch(error["code"])
    assert isinstance(error["message"], str)
    if "details" in error:
        assert isinstance(error["details"], dict)


def check_result(envelope: dict[str, Any]) -> dict[str, Any]:
    """The MCP-AQL operation-result schema: success with data (+warnings, _meta, results, summary) or failure."""
    if envelope.get("success") is True:
        _keys(envelope, {"success", "data", "warnings", "_meta", "results", "summary"}, {"success", "data"})
        for warning in envelope.get("warnings", []):
            _keys(warning, {"code", "message", "details", "severity"}, {"code", "message"})
            assert CODE.fullmatch(warning["code"])
            assert warning.get("severity", "low") in ("low", "medium", "high")
        return envelope
    allowed = {
        "success",
        "error",
        "confirmation",
        "deprecated",
        "deprecationMessage",
        "deprecatedSince",
        "removalVersion",
    }
    _keys(envelope, allowed, {"success", "error"})
    assert envelope["success"] is False
    _error(envelope["error"])
    if "confirmation" in envelope:
        confirmation = envelope["confirmation"]
        assert {"token", "expires_at"} <= set(confirmation)
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", confirmation["expires_at"])
    return envelope


def _parameter(info: dict[str, Any]) -> None:
    _keys(info, PARAMETER_KEYS, {"name", "type", "required"})
    assert isinstance(info["name"], str)
    assert isinstance(info["type"], str)
    assert isinstance(info["required"], bool)


def _operation_details(op: dict[str, Any]) -> None:
    allowed = {
        "name",
        "semantic_category",
        "endpoint",
        "mcpTool",
        "description",
        "permissions",
        "parameters",
        "returns",
        "examples",
        "computed_fields",
        "aggregation_support",
        "relationship_capabilities",
        "lifecycle",
    }
    _keys(
        op,
        allowed,
        allowed - {"examples", "computed_fields", "aggregation_support", "relationship_capabilities", "lifecycle"},
    )
    assert op["semantic_category"] in CATEGORIES
    assert op["endpoint"]
    _keys(op["permissions"], {"readOnly", "destructive"}, {"readOnly", "destructive"})
    for info in op["parameters"]:
        _parameter(info)
    _keys(op["returns"], {"name", "kind", "description"}, {"name", "kind"})
    for example in op.get("examples", []):
        _keys(example, {"description", "request"}, {"request"})
    if "lifecycle" in op:
        _keys(op["lifecycle"], {"states", "supports_cancel", "supports_retry", "progress_reporting"}, {"states"})


def _type_details(found: dict[str, Any]) -> None:
    extra = {"enum": "values", "object": "fields", "union": "members", "scalar": None}[found["kind"]]
    allowed = {"name", "kind", "description"} | ({extra} if extra else set())
    _keys(found, allowed, {"name", "kind"} | ({extra} if extra else set()))
    for field in found.get("fields", []):
        _parameter(field)


def check_introspection(envelope: dict[str, Any]) -> dict[str, Any]:
    """The MCP-AQL introspection-response schema, one of its four data shapes or a failure."""
    if envelope["success"] is False:
        _keys(envelope, {"success", "error"}, {"success", "error"})
        _keys(envelope["error"], {"code", "message"}, {"code", "message"})
        return envelope
    _keys(envelope, {"success", "data"}, {"success", "data"})
    data = envelope["data"]
    if "operations" in data:
        _keys(data, {"_protocol", "operations"}, {"operations"})
        if "_protocol" in data:
            protocol = data["_protocol"]
            assert VERSION.fullmatch(protocol["version"])
            assert protocol.get("conformance", "level-1") in ("level-1", "level-2")
            assert protocol.get("mode", "semantic") in ("semantic", "single", "all")
        for op in data["operations"]:
            _keys(
                op,
                {"name", "semantic_category", "endpoint", "description"},
                {"name", "semantic_category", "endpoint", "description"},
            )
            assert op["semantic_category"] in CATEGORIES
    elif "operation" in data:
        _keys(data, {"operation"}, {"operation"})
        if data["operation"] is not None:
            _operation_details(data["operation"])
    elif "types" in data:
        _keys(data, {"types"}, {"types"})
        for summary in data["types"]:
            _keys(summary, {"name", "kind", "description"}, {"name", "kind"})
    else:
        _keys(data, {"type"}, {"type"})
        if data["type"] is not None:
            _type_details(data["type"])
    return envelope


def _bare(result: dict[str, Any]) -> None:
    if result["success"]:
        _keys(result, {"success", "data"}, {"success", "data"})
    else:
        _keys(result, {"success", "error"}, {"success", "error"})
        _keys(result["error"], set(result["error"]), {"code", "message"})


def check_batch(envelope: dict[str, Any]) -> dict[str, Any]:
    """The MCP-AQL batch-operation schema: a batch success (maybe halted) or a batch-level failure."""
    if envelope["success"] is False:
        _keys(envelope, {"success", "error"}, {"success", "error"})
        _error(envelope["error"], details=False)
        return envelope
    _keys(
        envelope,
        {"success", "data", "results", "halted_at", "pending_operations", "summary"},
        {"success", "results", "summary"},
    )
    assert envelope.get("data") is None
    for item in envelope["results"]:
        _keys(item, {"index", "operation", "result", "status"}, {"index", "operation", "result"})
        _bare(item["result"])
    if "halted_at" in envelope:
        _keys(envelope["halted_at"], {"index", "operation", "result"}, {"index", "operation", "result"})
        _bare(envelope["halted_at"]["result"])
    for item in envelope.get("pending_operations", []):
        _keys(item, {"index", "operation", "params"}, {"index", "operation"})
    _keys(
        envelope["summary"],
        {"total", "succeeded", "failed", "halted", "pending", "pending_confirmation"},
        {"total", "succeeded", "failed"},
    )
    return envelope
