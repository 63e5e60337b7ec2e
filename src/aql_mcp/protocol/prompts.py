"""`prompts/list` and `prompts/get` (MCP 2025-11-25 server/prompts; corporate §10)."""

from __future__ import annotations

from typing import Any

from aql_mcp.auth.principal import withheld_reason
from aql_mcp.exceptions import InsufficientScope, InvalidParams
from aql_mcp.observability.mcp_request import current_request
from aql_mcp.protocol.context import Context
from aql_mcp.protocol.pagination import paginate
from aql_mcp.protocol.policy import ScopeRules
from aql_mcp.protocol.primitives import Registry


class PromptMethods:
    def __init__(self, registry: Registry, *, page_size: int, rules: ScopeRules) -> None:
        self._registry = registry
        self._page_size = page_size
        self._rules = rules

    async def list(self, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
        listing = [prompt.to_wire() for prompt in self._registry.prompts()]
        page, next_cursor = paginate(listing, params, self._page_size)
        result: dict[str, Any] = {"prompts": page}
        if next_cursor:
            result["nextCursor"] = next_cursor
        return result

    async def get(self, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
        name = params.get("name")
        arguments = params.get("arguments") or {}
        if not isinstance(name, str):
            raise InvalidParams(data={"field": "name", "reason": "required"})
        if not isinstance(arguments, dict) or not all(isinstance(v, str) for v in arguments.values()):
            raise InvalidParams(data={"field": "arguments", "reason": "type"})
        prompt = self._registry.prompt(name)
        if prompt is None:
            raise InvalidParams("Unknown prompt", data={"field": "name", "reason": "unknown"})
        request = current_request()
        if request is not None:
            request.name_prompt(name)
        missing = self._rules.missing_for_prompt(name, ctx.principal)
        if missing:
            raise InsufficientScope(missing, withheld_reason(ctx.principal, missing))
        for argument in prompt.arguments:
            if argument.required and argument.name not in arguments:
                raise InvalidParams(data={"field": f"arguments.{argument.name}", "reason": "required"})
        messages = await prompt.handler(arguments, ctx)
        return {"description": prompt.description, "messages": messages}
