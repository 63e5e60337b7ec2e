"""Parameter resolution and validation (MCP-AQL §4.2, §4.6; MCP-AQL error codes §4).

`params.<name>` wins over a top-level `<name>`; `operation`, `params`, `operations` and
`_`-prefixed metadata are not parameters (§4.6.1). Every failure becomes a registry code with the
details the error-codes document lists, never the rejected value of a sensitive parameter; an
enum or pattern failure names what is allowed.

The confirmation token (`confirmation_token`, or `_confirmation` as the gatekeeper document spells
it) is a parameter only of the operations the gatekeeper can ask to confirm; anywhere else both
names are unknown parameters, so a caller never believes it confirmed something that needs no
confirmation, and introspection documents exactly what is accepted (docs/aql.md).

A parameter model's `parameter_aliases` (deprecated spellings, such as the camelCase names of MCP-AQL
§8.6.3/§8.7.4) are renamed to the published snake_case names (§4.3) before validation, each with a
DEPRECATION_WARNING; both spellings of one parameter in one call is a validation error naming both.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from aql_mcp.operations.models import Operation, Params
from aql_mcp.operations.results import (
    VALIDATION_INVALID_TYPE,
    VALIDATION_MISSING_PARAM,
    VALIDATION_UNKNOWN_PARAM,
    OperationError,
    warning,
)
from aql_mcp.protocol.parameter_models import BUILTIN_ERRORS, validate_json_values

DEPRECATION_WARNING = "DEPRECATION_WARNING"
PROTOCOL_FIELDS = frozenset({"operation", "params", "operations"})
CONFIRMATION_TOKEN = "confirmation_token"  # noqa: S105 (a parameter name, not a secret)
CONFIRMATION_PARAMS = ("_confirmation", CONFIRMATION_TOKEN)

JSON_TYPES = {
    "str": "string",
    "int": "integer",
    "float": "number",
    "bool": "boolean",
    "dict": "object",
    "list": "array",
    "NoneType": "null",
}


def resolve(arguments: dict[str, Any], *, confirmable: bool) -> tuple[dict[str, Any], str | None]:
    """The operation's parameters and, for an operation that can need confirmation, the token if any;
    elsewhere the token's names stay among the parameters, for `validate` to refuse."""
    params = arguments.get("params", {})
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise invalid_type("params", "object", params)
    merged = {k: v for k, v in arguments.items() if k not in PROTOCOL_FIELDS}
    merged.update(params)
    token = None
    for name in CONFIRMATION_PARAMS if confirmable else ():
        value = merged.pop(name, None)
        if value is not None:
            if not isinstance(value, str):
                raise invalid_type(name, "string", value)
            token = value
    return {k: v for k, v in merged.items() if not k.startswith("_") or k in CONFIRMATION_PARAMS}, token


def rename_aliases(operation: Operation, values: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """`values` under the published parameter names, and a warning for each deprecated alias used."""
    aliases = operation.params.parameter_aliases
    if not aliases:  # nearly every operation: nothing to look for on the call's path
        return values, []
    used = [name for name in values if name in aliases]
    if not used:
        return values, []
    renamed = dict(values)
    notices = []
    for alias in used:
        name = aliases[alias]
        if name in values:
            raise OperationError(
                VALIDATION_INVALID_TYPE,
                f"Parameter '{name}' given twice: as '{name}' and as its deprecated alias '{alias}'; "
                f"send '{name}' only",
                {
                    "param_name": name,
                    "operation": operation.name,
                    "expected_type": "one value",
                    "actual_type": "two values",
                    "conflicting_params": [name, alias],
                },
            )
        renamed[name] = renamed.pop(alias)
        notices.append(
            warning(
                DEPRECATION_WARNING,
                f"Parameter '{alias}' is a deprecated alias; use '{name}'",
                {"operation": operation.name, "deprecated_param": alias, "replacement": name},
                "low",
            )
        )
    return renamed, notices


def validate(operation: Operation, values: dict[str, Any], *, confirmable: bool = False) -> Params:
    """The operation's parameter model built from `values`, or the first violation as an OperationError."""
    fields = operation.params.model_fields
    unknown = sorted(k for k in values if k not in fields)
    if unknown:
        valid = [*fields, CONFIRMATION_TOKEN] if confirmable else list(fields)
        raise OperationError(
            VALIDATION_UNKNOWN_PARAM,
            f"Unknown parameter(s) for operation '{operation.name}': {', '.join(unknown)}. "
            f"Valid parameters: {', '.join(valid) or 'none'}",
            {"operation": operation.name, "unknown_params": unknown, "valid_params": valid},
        )
    try:
        return validate_json_values(operation.params, values)
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
    allowed = _allowed(operation, error)
    if allowed is not None:
        return _not_allowed(name, allowed, details)
    message = f"Parameter '{name}' expected '{expected}', got '{details['actual_type']}'"
    if error["type"] not in _TYPE_ERRORS and not (sensitive and error["type"] not in BUILTIN_ERRORS):
        # A validator's own message may quote the value: never for a sensitive parameter.
        details["constraint"] = error["msg"]
        message += f" ({error['msg']})"
    return OperationError(VALIDATION_INVALID_TYPE, message, details)


def _allowed(operation: Operation, error: ErrorDetails) -> dict[str, Any] | None:
    """What an enum or pattern parameter allows, from the model's schema (enum) or the error (pattern)."""
    context = error.get("ctx") or {}
    if error["type"] == "string_pattern_mismatch" and isinstance(context.get("pattern"), str):
        return {"pattern": context["pattern"]}
    if error["type"] in ("literal_error", "enum"):
        values = _enum_at(operation.params.model_json_schema(), error["loc"])
        if values is not None:
            return {"allowed_values": values}
    return None


def _not_allowed(name: str, allowed: dict[str, Any], details: dict[str, Any]) -> OperationError:
    if "pattern" in allowed:
        details.update(expected_type="string matching the pattern", pattern=allowed["pattern"])
        return OperationError(
            VALIDATION_INVALID_TYPE,
            f"Parameter '{name}' must match the pattern {allowed['pattern']}",
            details,
        )
    values = allowed["allowed_values"]
    listed = ", ".join(json.dumps(value) for value in values)
    details.update(expected_type=f"one of: {listed}", allowed_values=values)
    return OperationError(VALIDATION_INVALID_TYPE, f"Parameter '{name}' must be one of: {listed}", details)


def _enum_at(schema: dict[str, Any], location: tuple[int | str, ...]) -> list[Any] | None:
    """The enum values of the schema node at `location`, through `$ref`, `anyOf` and array items."""
    node: dict[str, Any] | None = schema
    for part in location:
        node = _child(schema, node or {}, part)
        if node is None:
            return None
    for member in _alternatives(schema, node or {}):
        if "enum" in member:
            return list(member["enum"])
        if "const" in member:
            return [member["const"]]
    return None


def _child(root: dict[str, Any], node: dict[str, Any], part: int | str) -> dict[str, Any] | None:
    for member in _alternatives(root, node):
        if isinstance(part, str) and part in member.get("properties", {}):
            return dict(member["properties"][part])
        if isinstance(part, int) and isinstance(member.get("items"), dict):
            return dict(member["items"])
    return None


def _alternatives(root: dict[str, Any], node: dict[str, Any]) -> list[dict[str, Any]]:
    members = node.get("anyOf") or node.get("oneOf") or [node]
    out = []
    for member in members:
        ref = member.get("$ref")
        if isinstance(ref, str):
            member = root.get("$defs", {}).get(ref.rsplit("/", 1)[-1], {})
        out.append(member)
    return out


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
    if error["type"].endswith("_parsing"):  # JSON mode: a string that is no date, UUID, ...
        return error["type"].removesuffix("_parsing")
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
