"""The MCP-AQL agent guide as a skill (`skill://mcp-aql/SKILL.md`; docs/discovery.md, "Skills").

SKILL.md says how to call this server's MCP-AQL tools: which tools exist, the call and batch
shapes, introspection, the result envelope and confirmations. `references/operations.md` lists
every operation with its typed parameters, as introspection would answer. Both are written at
each read from the operations served at that moment, so they follow the tools as plugins add
operations; the manifest's digests are taken from the same text (protocol/skill.py).
"""

from __future__ import annotations

from aql_mcp.operations.endpoints import PURPOSES, SINGLE_PURPOSE, Surface, family_of
from aql_mcp.operations.introspection import operations_guide
from aql_mcp.operations.models import Operation
from aql_mcp.operations.registry import OperationRegistry
from aql_mcp.protocol.skill import Skill, SkillFile

NAME = "mcp-aql"
DESCRIPTION = (
    "How to call this server's MCP-AQL tools: pick the tool by operation family, send "
    '{"operation", "params"} or a batch, discover parameters with introspect, read the result envelope.'
)
REFERENCE = "references/operations.md"


class AgentGuide:
    """Writes the guide from the surface (tool names) and the operations served now."""

    def __init__(self, surface: Surface, operations: OperationRegistry, *, max_batch_size: int) -> None:
        self._surface = surface
        self._operations = operations
        self._max_batch_size = max_batch_size

    def skill(self) -> Skill:
        reference = SkillFile(REFERENCE, self.reference)
        return Skill.of(NAME, DESCRIPTION, self.body, files=(reference,), metadata={"protocol": "MCP-AQL"})

    def tools(self) -> list[tuple[str, str, list[Operation]]]:
        """(tool name, purpose, operations) of every tool that serves an operation now."""
        surface, served = self._surface, list(self._operations.operations())
        out: list[tuple[str, str, list[Operation]]] = []
        if surface.has_families:
            for family in surface.families:
                ops = [op for op in served if family_of(op, surface.profile) == family]
                if ops:
                    out.append((surface.tool_name(family), PURPOSES[family], ops))
        if surface.has_single and served:
            out.append((surface.tool_name(None), SINGLE_PURPOSE, served))
        return out

    def body(self) -> str:
        introspect = self._surface.introspect_tool
        tools = "\n".join(
            f"- `{name}`: {purpose} Operations: {', '.join(f'`{op.name}`' for op in ops)}."
            for name, purpose, ops in self.tools()
        )
        return (
            "# Calling this server's MCP-AQL tools\n\n"
            "This server folds its operations into a few MCP tools (MCP-AQL). Each tool serves one family "
            "of operations; name the operation in the call.\n\n"
            f"## Tools\n\n{tools or '- (no operations are served now)'}\n\n"
            "## One operation\n\n"
            'Call the tool with `{"operation": "<name>", "params": {...}}`. An operation sent to the wrong '
            "tool is answered `VALIDATION_ENDPOINT_MISMATCH` naming the right one.\n\n"
            "## A batch\n\n"
            'Send `{"operations": [{"operation": ..., "params": ...}, ...]}` (at most '
            f"{self._max_batch_size} items) to run several in order; each item has its own result. A batch "
            "costs one unit of the rate limit per operation.\n\n"
            "## Parameters\n\n"
            f'Call `{introspect}` with `{{"operation": "introspect", "params": {{"query": "operations"}}}}` to '
            'list the operations, and add `"name": "<operation>"` for one operation\'s parameters. '
            f"[{REFERENCE}]({REFERENCE}) lists them all.\n\n"
            "## Results\n\n"
            'Every result is `{"success": true, "data": ...}` or `{"success": false, "error": {"code", '
            '"message"}}`; read `error.code` before retrying.\n\n'
            "## Confirmations\n\n"
            "A dangerous operation may be answered `CONFIRMATION_REQUIRED` with a token "
            "(`error.details.confirmation_token`). Ask the user; send the same call again with "
            "`confirmation_token` set to run it. The token is single use and expires.\n"
        )

    def reference(self) -> str:
        sections = [f"## `{name}`\n\n{operations_guide(ops, self._operations)}" for name, _, ops in self.tools()]
        return "# MCP-AQL operations\n\n" + "\n\n".join(sections) + "\n"
