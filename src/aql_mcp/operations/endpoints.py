"""The endpoint families and the MCP tools that front them (MCP-AQL §3.3, MCP-AQL endpoint modes).

`semantic` mode registers one tool per family of the active profile (`crude`: create, read,
update, delete, execute; `dqmo`: discover, query, manage, operate), `single` registers one
`mcp_aql` tool, `all` both. A family's tool is registered once it has an operation, and is
registered again whenever its operations change, so its description always names them.

The tools' `inputSchema` stays open at the top level: MCP-AQL §4.2 lets parameters sit beside
`operation`, and an unknown one must be answered by the router with `VALIDATION_UNKNOWN_PARAM`
and the valid names, which a generic `additionalProperties: false` check cannot do. It declares
the type of `operation`, `params` and `operations` (the MCP-AQL operation-input schema), so a
client and the MCP Inspector know them, but the service does not hold arguments to it before the
router: a wrong type must come back as an OperationResult envelope with an MCP-AQL code
(`VALIDATION_INVALID_TYPE`, `VALIDATION_MISSING_PARAM`), which the router words and a generic
schema check cannot, so the tools are registered as checking their own arguments. No `enum` of
operation names either: an operation sent to the wrong family must reach the router to be
answered `VALIDATION_ENDPOINT_MISMATCH` naming the right tool, and an unknown one
`NOT_FOUND_OPERATION` with the list of available ones.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from aql_mcp.operations.models import DANGER_LEVELS, RISK_WORDS, Category, Operation
from aql_mcp.protocol.primitives import Tool

# Family -> the semantic categories it serves; `discover` takes the READ operations marked `discovery`.
PROFILES: Mapping[str, Mapping[str, tuple[Category, ...]]] = {
    "crude": {
        "create": ("CREATE",),
        "read": ("READ",),
        "update": ("UPDATE",),
        "delete": ("DELETE",),
        "execute": ("EXECUTE",),
    },
    "dqmo": {
        "discover": ("READ",),
        "query": ("READ",),
        "manage": ("CREATE", "UPDATE", "DELETE"),
        "operate": ("EXECUTE",),
    },
}
PURPOSES: Mapping[str, str] = {
    "create": "Additive operations: create new resources; nothing existing is overwritten.",
    "read": "Read-only operations: get, list, search and introspect; no side effects.",
    "update": "Modifying operations: change existing resources (UPDATE input objects deep-merge).",
    "delete": "Removing operations: delete resources; deleted data cannot be recovered.",
    "execute": "Runtime lifecycle operations: start, monitor and cancel executions.",
    "discover": "Discovery operations: introspection and what collections and types exist; read-only.",
    "query": "Retrieval operations: get, list and search with filters, sort, fields and pagination; read-only.",
    "manage": "Mutating operations: create, update and delete resources.",
    "operate": "Runtime lifecycle operations: start, monitor and cancel executions.",
}
# The endpoints whose tools may change state in place (MCP-AQL CRUDE pattern §3.1, "Destructive").
DESTRUCTIVE_ENDPOINTS: tuple[Category, ...] = ("UPDATE", "DELETE", "EXECUTE")
OPERATION_HEADER = "Operation"
SINGLE_PURPOSE = "Unified MCP-AQL endpoint: every operation, routed by its name."
INPUT_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "operation": {
            "type": "string",
            "description": "Operation name, e.g. 'introspect'.",
            # SEP-2243: a 2026-07-28 client mirrors it into `Mcp-Param-Operation`, so a gateway can
            # route, limit and authorize per MCP-AQL operation without reading the body (docs/gateway.md).
            "x-mcp-header": OPERATION_HEADER,
        },
        "params": {
            "type": "object",
            "description": "Operation parameters; see introspect for each operation's parameters.",
        },
        "operations": {
            "type": "array",
            "description": "Batch run in order instead of one operation.",
            "items": {
                "type": "object",
                "properties": {"operation": {"type": "string"}, "params": {"type": "object"}},
                "required": ["operation"],
            },
        },
    },
    "required": [],
}

INTROSPECT_EXAMPLE: Mapping[str, Any] = {"operation": "introspect", "params": {"query": "operations"}}


def family_of(operation: Operation, profile: str) -> str:
    """The family of the profile that serves the operation."""
    if profile == "dqmo":
        if operation.category == "READ":
            return "discover" if operation.discovery else "query"
        return "operate" if operation.category == "EXECUTE" else "manage"
    return operation.category.lower()


@dataclass(frozen=True, slots=True)
class Surface:
    """Which tools exist: the mode, the profile and the tool names."""

    mode: str
    profile: str
    prefix: str

    @property
    def families(self) -> tuple[str, ...]:
        return tuple(PROFILES[self.profile])

    @property
    def has_families(self) -> bool:
        return self.mode in ("semantic", "all")

    @property
    def has_single(self) -> bool:
        return self.mode in ("single", "all")

    def tool_name(self, family: str | None) -> str:
        return self.prefix if family is None else f"{self.prefix}_{family}"

    @property
    def introspect_tool(self) -> str:
        """The tool that answers `introspect` (a READ operation marked `discovery`)."""
        if not self.has_families:
            return self.tool_name(None)
        return self.tool_name("discover" if self.profile == "dqmo" else "read")

    def tool_for(self, operation: Operation) -> str:
        """The tool introspection names as `mcpTool`: the family's tool unless only `mcp_aql` exists."""
        return self.tool_name(family_of(operation, self.profile) if self.has_families else None)

    def describe_profile(self, served: Collection[str]) -> dict[str, Any]:
        """The category mapping, for `_protocol.families` in introspection: only the families that
        serve an operation (`served`), so every tool named there is registered."""
        return {
            family: {
                "tool": self.tool_name(family) if self.has_families else self.tool_name(None),
                "categories": list(categories),
                "description": PURPOSES[family],
            }
            for family, categories in PROFILES[self.profile].items()
            if family in served
        }


def build_tool(
    surface: Surface,
    family: str | None,
    operations: list[Operation],
    handler: Any,
    gate: Callable[[Operation], str],
    guide: Callable[[], str] | None = None,
    max_batch_size: int | None = None,
) -> Tool:
    """The MCP tool of one family (or the single tool) for the operations it serves today; `guide`
    writes its operations and their parameters for the agent prompt; `max_batch_size` (the setting
    `aql.max_batch_size`) bounds `operations` in the schema, so a client that checks arguments
    before sending knows the batch limits. The tool is registered self-checking: the router, not
    the schema, still answers an empty or oversized batch with its MCP-AQL code."""
    names = ", ".join(op.name for op in operations)
    purpose = PURPOSES[family] if family else SINGLE_PURPOSE
    lines = [purpose, f"Operations: {names}."]
    lines.extend(_risk_lines(operations, gate))
    lines.append(
        'Call: {"operation": "<name>", "params": {...}}; batch: {"operations": [{"operation": ..., "params": ...}]}. '
        'Discover parameters with {"operation": "introspect", "params": {"query": "operations", "name": "<name>"}}'
        # The single tool takes every operation, introspect included.
        + (
            ""
            if family is None or surface.tool_name(family) == surface.introspect_tool
            else f" on {surface.introspect_tool}"
        )
        + "."
    )
    lines.append('Every result is {"success": true, "data": ...} or {"success": false, "error": {"code", "message"}}.')
    title = f"MCP-AQL {family}" if family else "MCP-AQL"
    name = surface.tool_name(family)
    schema = dict(INPUT_SCHEMA)
    if max_batch_size is not None:
        batch = {**INPUT_SCHEMA["properties"]["operations"], "minItems": 1, "maxItems": max_batch_size}
        schema["properties"] = {**INPUT_SCHEMA["properties"], "operations": batch}
    if name == surface.introspect_tool:
        # JSON Schema `examples`: a call that works on any deployment (the agent prompt's example).
        schema["examples"] = [INTROSPECT_EXAMPLE]
    return Tool(
        name=name,
        title=title,
        description="\n".join(lines),
        handler=handler,
        input_schema=schema,
        annotations=_annotations(operations),
        guide=guide,
    )


def _risk_lines(operations: list[Operation], gate: Callable[[Operation], str]) -> list[str]:
    """Corporate §9.3: the risk level and side effects of a mutating tool, in words."""
    mutating = [op for op in operations if op.category != "READ"]
    if not mutating:
        return ["Risk: none (read-only, no side effects)."]
    worst = max((op.danger_level for op in mutating), key=DANGER_LEVELS.index)
    lines = [f"Risk: {RISK_WORDS[worst]} (highest danger level: {worst})."]
    for op in mutating:
        effect = op.side_effects or op.description
        gated = {
            "confirm": " Needs confirmation (CONFIRMATION_REQUIRED, then retry with params.confirmation_token).",
            "deny": " Refused.",
        }
        gated_text = gated.get(gate(op), "")
        lines.append(f"- {op.name} [{op.danger_level}]: {effect}{gated_text}")
    lines.append("Mutations are written to the audit log; failed calls change nothing and may be retried.")
    return lines


def _annotations(operations: list[Operation]) -> dict[str, Any]:
    return {
        "readOnlyHint": all(op.category == "READ" for op in operations),
        # A tool's hint is its endpoint's permission (MCP-AQL CRUDE pattern §3.1: UPDATE, DELETE
        # and EXECUTE may change state in place), wider than any one operation's danger level.
        "destructiveHint": any(op.is_destructive or op.category in DESTRUCTIVE_ENDPOINTS for op in operations),
        "idempotentHint": all(op.is_idempotent for op in operations),
        "openWorldHint": False,
    }
