"""The trust level a plugin's operations are gated with (MCP-AQL trust levels, MCP-AQL danger levels §4.1).

A plugin declares its own `trust`, and nothing proves it: a plugin that calls itself `certified`
would run `dangerous` operations without confirmation and make `forbidden` ones confirmable. The
operator decides instead: `aql.max_trust` caps every declaration, and `aql.plugin_trust` sets a
named plugin's level outright (higher or lower than the cap), for plugins the operator has reviewed.
The reasons for the default cap are in docs/aql.md.
"""

from __future__ import annotations

from collections.abc import Mapping

from aql_mcp.operations.models import TRUST_LEVELS, TrustLevel


def effective_trust(
    plugin: str, declared: TrustLevel, *, ceiling: TrustLevel, overrides: Mapping[str, TrustLevel]
) -> TrustLevel:
    """The operator's level for this plugin if set, else the declared level capped by `ceiling`."""
    if plugin in overrides:
        return overrides[plugin]
    return min(declared, ceiling, key=TRUST_LEVELS.index)


def describe_trust(effective: TrustLevel, declared: TrustLevel) -> str:
    """How introspection names a plugin's trust: the level in force, and the declared one if it differs."""
    if effective == declared:
        return effective
    return f"{effective}, set by the operator (the plugin declares {declared})"
