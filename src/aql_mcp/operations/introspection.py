"""The `introspect` operation (MCP-AQL §7, MCP-AQL introspection, the MCP-AQL introspection-response schema).

`query: "operations"` lists operations with `_protocol` metadata; with `name` it gives one
operation's details, `null` for an unknown name. `query: "types"` does the same for types.
Parameter descriptions come from each operation's pydantic model, so they never drift; defaults
the model cannot know (the default field preset, page sizes from the settings) come from the
operation, and an operation the gatekeeper can ask to confirm documents `confirmation_token`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, Literal

from pydantic import Field

from aql_mcp.operations.endpoints import Surface, family_of
from aql_mcp.operations.gatekeeper import behavior
from aql_mcp.operations.models import Call, Example, Operation, Params, Returns, TypeDef
from aql_mcp.operations.parameters import CONFIRMATION_TOKEN
from aql_mcp.operations.registry import OperationRegistry
from aql_mcp.operations.trust import describe_trust

SPEC_VERSION = "1.0.0-draft"
PARAMETER_KEYS = ("enum", "minimum", "maximum", "minLength", "maxLength", "pattern", "format")
# MCP-AQL confirmation tokens §3.3, MCP-AQL gatekeeper §4.2: the retry carries the token.
CONFIRMATION_INFO: dict[str, Any] = {
    "name": CONFIRMATION_TOKEN,
    "type": "string",
    "required": False,
    "description": (
        "Only when a call was answered CONFIRMATION_REQUIRED: the token it returned "
        "(error.details.confirmation_token, also confirmation.token), sent with the same call again to "
        "run it. Single use, bound to this operation, its parameters, the caller and the session, and "
        "valid until confirmation.expires_at. Also accepted as _confirmation."
    ),
    "sensitive": True,
}


class IntrospectParams(Params):
    query: Literal["operations", "types"] = Field(description="What to list: 'operations' or 'types'.")
    name: str | None = Field(default=None, description="One operation or type to describe in detail.")


def introspect_operation(
    registry: OperationRegistry, surface: Surface, protocol: Callable[[], dict[str, Any]]
) -> Operation:
    async def handler(params: IntrospectParams, call: Call) -> dict[str, Any]:
        if params.query == "types":
            if params.name is None:
                return {"types": [t.summary() for t in registry.types()]}
            found = registry.type(params.name)
            return {"type": found.details() if found else None}
        if params.name is None:
            listing = [_summary(op, surface) for op in registry.operations()]
            return {"_protocol": protocol(), "operations": listing}
        operation = registry.get(params.name)
        return {"operation": _details(operation, surface, registry) if operation else None}

    return Operation(
        name="introspect",
        category="READ",
        description="Discover the available operations and types, and each operation's parameters.",
        handler=handler,
        params=IntrospectParams,
        returns=Returns("IntrospectionData", "union", "Operations or types, listed or in detail"),
        discovery=True,
        reserved=True,
        bare_errors=True,
        examples=(
            Example({"operation": "introspect", "params": {"query": "operations"}}, "List every operation"),
            Example(
                {"operation": "introspect", "params": {"query": "operations", "name": "introspect"}},
                "Parameters of one operation",
            ),
        ),
    )


def _summary(operation: Operation, surface: Surface) -> dict[str, Any]:
    return {
        "name": operation.name,
        "semantic_category": operation.category,
        "endpoint": family_of(operation, surface.profile),
        "description": operation.description,
    }


def _details(operation: Operation, surface: Surface, registry: OperationRegistry) -> dict[str, Any]:
    trust = registry.trust(operation.name)
    verdict = behavior(operation, trust)
    gate = {"allow": "runs without confirmation", "confirm": "needs confirmation", "deny": "refused"}[verdict]
    description = (
        f"{operation.description} Danger level: {operation.danger_level} ({gate}; plugin trust "
        f"{describe_trust(trust, registry.declared_trust(operation.name))})."
    )
    if operation.side_effects:
        description += f" Side effects: {operation.side_effects}"
    if operation.cost > 1:
        # ParameterInfo and OperationDetails allow no key of ours (docs/aql.md): the cost is said in words.
        description += f" Rate cost: {operation.cost} calls of the caller's budget per call."
    out: dict[str, Any] = {
        **_summary(operation, surface),
        "mcpTool": surface.tool_for(operation),
        "description": description,
        "permissions": {"readOnly": operation.category == "READ", "destructive": operation.is_destructive},
        "parameters": parameter_infos(operation, confirmable=verdict == "confirm"),
        "returns": operation.returns.to_wire(),
        "examples": [example.to_wire() for example in operation.examples],
    }
    if operation.lifecycle is not None:
        out["lifecycle"] = operation.lifecycle.to_wire()
    return out


def parameter_infos(operation: Operation, *, confirmable: bool = False) -> list[dict[str, Any]]:
    """ParameterInfo entries from the operation's pydantic model and hints (MCP-AQL introspection §3.4)."""
    schema = operation.params.model_json_schema()
    required = set(schema.get("required", ()))
    infos = []
    for name, field in operation.params.model_fields.items():
        prop = schema.get("properties", {}).get(name, {})
        info: dict[str, Any] = {"name": name, "type": _type_name(prop, schema), "required": name in required}
        description = _with_aliases(field.description or "", operation.params.parameter_aliases, name)
        if description:
            info["description"] = description
        if name not in required and prop.get("default") is not None:
            info["default"] = prop["default"]
        if name == "fields" and operation.field_presets is not None:
            info["default"] = operation.default_preset
        info.update(_constraints(prop, schema))
        info.update(operation.parameter_hints.get(name, {}))
        extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
        if extra.get("sensitive"):
            info["sensitive"] = True
        infos.append(info)
    if confirmable:
        infos.append(dict(CONFIRMATION_INFO))
    return infos


def _with_aliases(description: str, aliases: Mapping[str, str], name: str) -> str:
    """The description, and the deprecated aliases of the parameter: ParameterInfo has no other key
    for them (the MCP-AQL introspection-response schema allows no extra keys; docs/aql.md)."""
    spellings = [alias for alias, target in aliases.items() if target == name]
    if not spellings:
        return description
    listed = ", ".join(f"'{alias}'" for alias in spellings)
    note = f"Deprecated alias: {listed} (still accepted, with a DEPRECATION_WARNING; send '{name}')."
    return f"{description} {note}".strip()


def operations_guide(operations: list[Operation], registry: OperationRegistry) -> str:
    """The operations of one endpoint tool with their typed parameters, for the agent prompt: what
    introspection would answer for each, in a line each (corporate §10.4; MCP-AQL introspection §3.4)."""
    lines = ["Operations (name them in `operation`, their parameters go in `params`):"]
    for operation in operations:
        confirmable = behavior(operation, registry.trust(operation.name)) == "confirm"
        infos = parameter_infos(operation, confirmable=confirmable)
        described = "; ".join(_parameter_line(info) for info in infos) or "none"
        line = f"- `{operation.name}`: {operation.description} Parameters: {described}."
        if operation.examples:
            line += f" Example arguments: `{json.dumps(operation.examples[0].request, ensure_ascii=False)}`"
        lines.append(line)
    return "\n".join(lines)


def _parameter_line(info: dict[str, Any]) -> str:
    kind = str(info["type"])
    items = info.get("items")
    if kind == "array" and isinstance(items, dict):
        kind = f"array of {items['type']}"
    facts = [kind, "required" if info["required"] else "optional"]
    if "enum" in info:
        facts.append("one of " + ", ".join(json.dumps(value) for value in info["enum"]))
    if "default" in info:
        facts.append(f"default {json.dumps(info['default'])}")
    return f"`{info['name']}` ({', '.join(facts)})"


def _members(prop: dict[str, Any], schema: dict[str, Any]) -> list[dict[str, Any]]:
    members = prop.get("anyOf") or prop.get("oneOf") or [prop]
    resolved = [_deref(member, schema) for member in members]
    return [member for member in resolved if member.get("type") != "null"]


def _deref(prop: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    ref = prop.get("$ref")
    if isinstance(ref, str):
        return {**schema.get("$defs", {}).get(ref.rsplit("/", 1)[-1], {}), "title": ref.rsplit("/", 1)[-1]}
    return prop


def _type_name(prop: dict[str, Any], schema: dict[str, Any]) -> str:
    names = []
    for member in _members(prop, schema):
        kind = member.get("type")
        if kind is None and ("enum" in member or "const" in member):
            kind = "string"
        names.append(str(kind or "any"))
    return "|".join(dict.fromkeys(names)) or "any"


def _constraints(prop: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for member in _members(prop, schema):
        for key in PARAMETER_KEYS:
            if key in member and key not in out:
                out[key] = member[key]
        if "const" in member and "enum" not in out:
            out["enum"] = [member["const"]]
        if member.get("type") == "array" and "items" in member and "items" not in out:
            item = _deref(member["items"], schema)
            out["items"] = {"type": _type_name(item, schema)}
    return out


PROTOCOL_TYPES = (
    TypeDef(
        "SemanticCategory",
        "enum",
        "Standard semantic categories",
        {"values": ["CREATE", "READ", "UPDATE", "DELETE", "EXECUTE"]},
    ),
    TypeDef(
        "DangerLevel",
        "enum",
        "How much harm an operation can do; gates confirmation with the plugin's trust level",
        {"values": ["safe", "reversible", "destructive", "dangerous", "forbidden"]},
    ),
    TypeDef(
        "OperationInput",
        "object",
        "Standard input of every operation",
        {
            "fields": [
                {"name": "operation", "type": "string", "required": True, "description": "Operation name"},
                {"name": "params", "type": "object", "required": False, "description": "Operation parameters"},
                {
                    "name": "operations",
                    "type": "array",
                    "required": False,
                    "description": "A batch of {operation, params} run in order",
                },
            ]
        },
    ),
    TypeDef(
        "OperationResult",
        "union",
        "Standard result of every operation",
        {"members": ["OperationSuccess", "OperationFailure"]},
    ),
    TypeDef(
        "OperationSuccess",
        "object",
        "Successful operation result",
        {
            "fields": [
                {"name": "success", "type": "boolean", "required": True, "description": "Always true"},
                {"name": "data", "type": "any", "required": True, "description": "Operation-specific payload"},
                {"name": "warnings", "type": "array", "required": False, "description": "Non-fatal warnings"},
            ]
        },
    ),
    TypeDef(
        "OperationFailure",
        "object",
        "Failed operation result",
        {
            "fields": [
                {"name": "success", "type": "boolean", "required": True, "description": "Always false"},
                {"name": "error", "type": "object", "required": True, "description": "{code, message, details?}"},
                {
                    "name": "confirmation",
                    "type": "object",
                    "required": False,
                    "description": "With CONFIRMATION_REQUIRED: the token and its expiry",
                },
            ]
        },
    ),
    TypeDef(
        "PageInfo",
        "object",
        "Cursor pagination metadata of a collection result",
        {
            "fields": [
                {"name": "hasNextPage", "type": "boolean", "required": True},
                {"name": "hasPreviousPage", "type": "boolean", "required": True},
                {
                    "name": "startCursor",
                    "type": "string",
                    "required": False,
                    "description": "Pass as 'before' with 'last'",
                },
                {
                    "name": "endCursor",
                    "type": "string",
                    "required": False,
                    "description": "Pass as 'after' with 'first'",
                },
                {"name": "totalCount", "type": "integer", "required": False},
            ]
        },
    ),
    TypeDef(
        "FieldSelection",
        "object",
        "Field selection: a preset name or a list of dot paths",
        {
            "fields": [
                {"name": "presets", "type": "array", "required": False, "description": "minimal, standard, full"},
                {
                    "name": "fields",
                    "type": "array",
                    "required": False,
                    "description": "Dot paths such as 'metadata.priority'",
                },
            ]
        },
    ),
)
