"""`skills/list` and `skills/get` of the Skills extension (SEP-2640; docs/discovery.md, "Skills").

Both eras serve them from the one method table; the modern edge adds what every 2026-07-28 result
carries (`resultType`, `ttlMs`, `cacheScope`). A caller sees a skill only when it could read every
one of its files, by the rules `resources/read` applies (`auth.policy.resources`), so the listing
never names what a read would refuse.
"""

from __future__ import annotations

from typing import Any

from aql_mcp.auth.principal import Principal
from aql_mcp.exceptions import InsufficientScope, InvalidParams
from aql_mcp.protocol.context import Context
from aql_mcp.protocol.pagination import paginate
from aql_mcp.protocol.policy import ScopeRules
from aql_mcp.protocol.primitives import Registry
from aql_mcp.protocol.resources import check_uri
from aql_mcp.protocol.skill import Skill


class SkillMethods:
    def __init__(self, registry: Registry, *, page_size: int, rules: ScopeRules) -> None:
        self._registry = registry
        self._page_size = page_size
        self._rules = rules

    async def list(self, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
        """Every skill the caller may read, a page at a time; an entry is never split across pages."""
        visible = [skill for skill in self._registry.skills() if not self._missing(skill, ctx.principal)]
        page, next_cursor = paginate(visible, params, self._page_size)
        result: dict[str, Any] = {"skills": [skill.entry() for skill in page]}
        if next_cursor:
            result["nextCursor"] = next_cursor
        return result

    async def get(self, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
        """One skill's entry by the URI of its SKILL.md: -32602 for a URI that names no skill here
        (SEP-2640, "Getting a Skill"), and what `resources/read` answers to a caller who may not read it."""
        uri = check_uri(params.get("uri"), "uri")
        skill = self._registry.skill(uri)
        if skill is None:
            raise InvalidParams(f"No skill is served at {uri[:256]}", data={"field": "uri", "reason": "not_found"})
        missing = self._missing(skill, ctx.principal)
        if missing:
            raise InsufficientScope(missing)
        return {"skill": skill.entry()}

    def _missing(self, skill: Skill, principal: Principal | None) -> tuple[str, ...]:
        """The scopes the caller lacks to read every file of `skill`."""
        needed: list[str] = []
        for uri, _, _ in skill.contents():
            needed.extend(scope for scope in self._rules.missing_for_resource(uri, principal) if scope not in needed)
        return tuple(needed)
