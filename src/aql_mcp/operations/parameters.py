"""Parameter resolution and validation (MCP-AQL §4.2, §4.6; docs/error-codes.md §4).

`params.<name>` wins over a top-level `<name>`; `operation`, `params`, `operations` and
`_`-prefixed metadata are not parameters. Every failure becomes a registry code with the
details the error-codes document lists, never the rejected value of a sensitive parameter.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from aql_mcp.operations.models import Operation, Params
from aql_mcp.operations.results import (
    VALIDATION_INVALID_TYPE,
    VALIDATION_MISSING_PARAM,
    VALIDATION_UNKNOWN_PARAM,
    OperationError,
)

PROTOCOL_FIELDS = frozenset({"operation", "params", "operations"})
# Accepted on every operation; the gatekeeper reads them (DESIGN.md: both names are accepted).
CONFIRMATION_PARAMS = ("_confirmation", "confirmation_token")

JSON_TYPES = {
    "str": "string",
    "int": "integer",
    "float": "number",
    "bool": "boolean",
    "dict": "object",
    "list": "array",
    "NoneType": "null",
}


def resolve(arguments: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """The operation's parameters and the confirmation token, if any, from one request item."""
    params = arguments.get("params", {})
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise invalid_type("params", "object", params)
    merged = {k: v for k, v in arguments.items() if k not in PROTOCOL_FIELDS}
    merged.update(params)
    token = None
    for name in CONFIRMATION_PARAMS:
        value = merged.pop(name, None)
        if value is not None:
            if not isinstance(value, str):
                raise invalid_type(name, "string", value)
            token = value
    return {k: v for k, v in merged.items() if not k.startswith("_")}, token


def validate(operation: Operation, values: dict[str, Any]) -> Params:
    """The operation's parameter model built from `values`, or the first violation as an OperationError."""
    fields = operation.params.model_fields
    unknown = sorted(k for k in values if k not in fields)
    if unknown:
        raise OperationError(
            VALIDATION_UNKNOWN_PARAM,
            f"Unknown parameter(s) for operation '{operation.name}': {', '.join(unknown)}",
            {"operation": operation.name, "unknown_params": unknown, "valid_params": list(fields)},
        )
    try:
        return operation.params.model_validate(values)
    except ValidationError as exc:
        raise _translate(operation, exc.errors(include_url=False)[0]) from None


def _translate(operation: Operation, error: ErrorDetails) -> OperationError:
    location = error["loc"]
    name = ".".join(str(part) for part in location) if location else "params"
    top = str(location[0]) if location else ""
    if error["type"] == "missing":
        return OperationError(
            VALIDATION_MISSING_PARAM,
            f"Missing required parameter '{name}'",
            {"param_name": name, "operation": operation.name},
        )
    field = operation.params.model_fields.get(top)
    sensitive = bool(field and isinstance(field.json_schema_extra, dict) and field.json_schema_extra.get("sensitive"))
    expected = _expected(error)
    details: dict[str, Any] = {
        "param_name": name,
        "operation": operation.name,
        "expected_type": expected,
        "actual_type": json_type(error.get("input")),
    }
    if not sensitive and isinstance(error.get("input"), (int, float, bool)):
        details["value"] = error["input"]
    if error["type"] not in _TYPE_ERRORS:
        details["constraint"] = error["msg"]
    return OperationError(
        VALIDATION_INVALID_TYPE,
        f"Parameter '{name}' expected '{expected}', got '{details['actual_type']}'",
        details,
    )


_TYPE_ERRORS = {
    "string_type": "string",
    "int_type": "integer",
    "float_type": "number",
    "bool_type": "boolean",
    "dict_type": "object",
    "list_type": "array",
    "model_type": "object",
    "model_attributes_type": "object",
    "literal_error": "one of the allowed values",
    "enum": "one of the allowed values",
    "extra_forbidden": "no such field",
}


def _expected(error: ErrorDetails) -> str:
    known = _TYPE_ERRORS.get(error["type"])
    if known:
        return known
    if error["type"].endswith("_type"):
        return error["type"].removesuffix("_type")
    return "a value within the parameter's constraints"


def json_type(value: Any) -> str:
    return JSON_TYPES.get(type(value).__name__, type(value).__name__)


def invalid_type(name: str, expected: str, value: Any) -> OperationError:
    actual = json_type(value)
    return OperationError(
        VALIDATION_INVALID_TYPE,
        f"Parameter '{name}' expected '{expected}', got '{actual}'",
        {"param_name": name, "expected_type": expected, "actual_type": actual},
    )
