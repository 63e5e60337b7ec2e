"""The plugin contract: an object with a name and `register(registry)`."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from aql_mcp.registry import Registry


@runtime_checkable
class Plugin(Protocol):
    """Adds tools, prompts and resources to the registry by explicit calls at startup."""

    name: str

    def register(self, registry: Registry) -> None: ...
