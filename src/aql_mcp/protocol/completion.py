"""`completion/complete`: argument suggestions for prompts and resource templates."""

from __future__ import annotations

from typing import Any

from aql_mcp.exceptions import InvalidParams
from aql_mcp.protocol.context import Context
from aql_mcp.protocol.primitives import Completer, Registry

MAX_VALUES = 100  # MCP server/utilities/completion: at most 100 items per response


class CompletionMethods:
    def __init__(self, registry: Registry) -> None:
        self._registry = registry

    async def complete(self, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
        ref, argument = params.get("ref"), params.get("argument")
        if not isinstance(ref, dict) or not isinstance(argument, dict):
            raise InvalidParams(data={"field": "ref", "reason": "required"})
        name, value = argument.get("name"), argument.get("value", "")
        if not isinstance(name, str) or not isinstance(value, str):
            raise InvalidParams(data={"field": "argument", "reason": "type"})
        context = params.get("context") or {}
        known = context.get("arguments") if isinstance(context, dict) else None
        completer = self._completer(ref, name)
        values = await completer(value, known if isinstance(known, dict) else {}) if completer else []
        return {
            "completion": {
                "values": values[:MAX_VALUES],
                "total": len(values),
                "hasMore": len(values) > MAX_VALUES,
            }
        }

    def _completer(self, ref: dict[str, Any], argument: str) -> Completer | None:
        kind = ref.get("type")
        if kind == "ref/prompt":
            prompt = self._registry.prompt(str(ref.get("name")))
            if prompt is None:
                raise InvalidParams("Unknown prompt", data={"field": "ref.name", "reason": "unknown"})
            return next((a.complete for a in prompt.arguments if a.name == argument), None)
        if kind == "ref/resource":
            template = self._registry.template(str(ref.get("uri")))
            if template is None:
                raise InvalidParams("Unknown resource template", data={"field": "ref.uri", "reason": "unknown"})
            return template.complete.get(argument)
        raise InvalidParams(data={"field": "ref.type", "reason": "enum"})
