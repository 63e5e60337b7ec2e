"""A plugin with settings of its own (`plugins.tuned`, issue 15): a tool that answers with its
configured level (`tests.support.tuned:plugin`)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from aql_mcp.plugin import Context, Registry, Tool

NAME = "tuned"


class TunedSettings(BaseModel):
    model_config = ConfigDict(frozen=True)  # says nothing about extras: the loader forbids them

    level: int = Field(default=1, ge=1, le=5)
    labels: tuple[str, ...] = ()


class Tuned:
    name = NAME
    settings_model = TunedSettings

    def __init__(self) -> None:
        self.settings = TunedSettings()

    def configure(self, settings: TunedSettings) -> None:
        self.settings = settings

    def register(self, registry: Registry) -> None:
        async def level(arguments: dict[str, Any], ctx: Context) -> str:
            return f"{self.settings.level} {','.join(self.settings.labels)}".strip()

        registry.add_tool(Tool("tuned_level", "The configured level. Read-only, risk: low.", level))


plugin = Tuned()
