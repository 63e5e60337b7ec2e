"""Which scopes a caller needs for a tool, prompt, resource or MCP-AQL operation (`auth.policy`).

Coarse access (may this token use `/mcp` at all) is decided by the auth middleware before the
body is read; everything finer is decided here, inside JSON-RPC handling, and answered in-band.
An entry lists the scopes needed, all of them; `*` applies to names without an entry of their
own, and a resource entry ending in `*` covers every URI with that prefix.
"""

from __future__ import annotations

from collections.abc import Mapping

from aql_mcp.auth.principal import Principal

Rules = Mapping[str, tuple[str, ...]]


class ScopeRules:
    def __init__(
        self,
        *,
        tools: Rules | None = None,
        prompts: Rules | None = None,
        resources: Rules | None = None,
        operations: Rules | None = None,
        families: Rules | None = None,
    ) -> None:
        self._tools = dict(tools or {})
        self._prompts = dict(prompts or {})
        self._resources = dict(resources or {})
        self._operations = dict(operations or {})
        self._families = dict(families or {})
        self._prefixes = sorted(
            ((k[:-1], v) for k, v in self._resources.items() if k.endswith("*")), key=lambda kv: -len(kv[0])
        )
        self.empty = not (tools or prompts or resources or operations or families)

    def missing_for_tool(self, name: str, principal: Principal | None) -> tuple[str, ...]:
        return _missing(self._tools.get(name, self._tools.get("*", ())), principal)

    def missing_for_prompt(self, name: str, principal: Principal | None) -> tuple[str, ...]:
        return _missing(self._prompts.get(name, self._prompts.get("*", ())), principal)

    def missing_for_operation(
        self,
        name: str,
        family: str,
        principal: Principal | None,
        *,
        family_tool: str,
        family_tool_exists: bool,
    ) -> tuple[str, ...]:
        """An MCP-AQL operation needs its own scopes, its family's and its family tool's, whichever tool
        carried it: a rule on `mcp_aql_delete` binds a delete sent through `mcp_aql` (issue 12).

        A family tool's own entry binds in every mode; the `*` entry binds it only where the family
        tool is registered (modes `semantic` and `all`), since in `single` mode `*` speaks of tools
        that exist and `mcp_aql` has its own rule.
        """
        default_tool = self._tools.get("*", ()) if family_tool_exists else ()
        needed: tuple[str, ...] = ()
        for rule in (
            self._operations.get(name, self._operations.get("*", ())),
            self._families.get(family, self._families.get("*", ())),
            self._tools.get(family_tool, default_tool),
        ):
            needed += tuple(scope for scope in rule if scope not in needed)
        return _missing(needed, principal)

    def missing_for_resource(self, uri: str, principal: Principal | None) -> tuple[str, ...]:
        needed = self._resources.get(uri)
        if needed is None:
            needed = next((v for prefix, v in self._prefixes if uri.startswith(prefix)), ())
        return _missing(needed, principal)


def _missing(needed: tuple[str, ...], principal: Principal | None) -> tuple[str, ...]:
    held = principal.scopes if principal is not None else frozenset()
    return tuple(scope for scope in needed if scope not in held)
