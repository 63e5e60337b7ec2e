"""An example aql-mcp plugin: one MCP-AQL operation (`greet`), one plain tool (`greeting`), and a
setting of its own (`plugins.greeter.greeting`, AQL_MCP_PLUGINS__GREETER__GREETING).

It imports from `aql_mcp.plugin` only: the one module whose names are the plugin API.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from aql_mcp.plugin import Call, Context, Operation, Params, PluginOperations, Registry, Tool, TrustLevel


class GreeterSettings(BaseModel):
    """`plugins.greeter`: validated at startup, before the plugin registers anything."""

    # Frozen like the service's own sections; an unknown key is refused (the loader's default too).
    model_config = ConfigDict(frozen=True, extra="forbid")

    greeting: str = Field(default="Hello", min_length=1, max_length=40, description="The word a greeting starts with")


class Greet(Params):
    name: str = Field(min_length=1, max_length=100, description="Who to greet")


class GreeterPlugin:
    """Registers the operation and the tool with the greeting its settings give."""

    name = "greeter"
    trust: TrustLevel = "validated"
    settings_model = GreeterSettings

    def __init__(self) -> None:
        self.settings = GreeterSettings()

    def configure(self, settings: GreeterSettings) -> None:
        self.settings = settings

    def greet(self, name: str) -> str:
        return f"{self.settings.greeting}, {name}!"

    def register_operations(self, operations: PluginOperations) -> None:
        async def greet(params: Greet, call: Call) -> dict[str, str]:
            return {"greeting": self.greet(params.name)}

        operations.add(Operation("greet", "READ", "Greet someone by name.", greet, Greet))

    def register(self, registry: Registry) -> None:
        async def greeting(arguments: dict[str, str], ctx: Context) -> str:
            return self.greet(arguments["name"])

        schema = {
            "type": "object",
            "properties": {"name": {"type": "string", "minLength": 1, "maxLength": 100, "description": "Who to greet"}},
            "required": ["name"],
            "additionalProperties": False,
        }
        description = "Greet someone by name. Read-only, risk: low."
        registry.add_tool(Tool("greeting", description, greeting, schema, annotations={"readOnlyHint": True}))


plugin = GreeterPlugin()
