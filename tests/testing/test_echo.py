from typing import Any

import pytest
from jsonschema import Draft202012Validator

from aql_mcp.protocol.context import Context
from aql_mcp.protocol.primitives import RegisteredTool, Registry
from aql_mcp.testing.echo import plugin


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class SilentOutbound:
    async def notify(self, method: str, params: dict[str, Any]) -> None:
        raise AssertionError(f"echo must not notify ({method} {params})")

    async def ask(self, requests: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        raise AssertionError(f"echo must not ask ({sorted(requests)})")

    def missing_capability(self, capability: str) -> Exception:
        raise AssertionError(f"echo must not ask ({capability})")

    async def close_connection(self) -> None:
        raise AssertionError("echo must not close the connection")


class NoHub:
    async def resource_updated(self, uri: str) -> None:
        raise AssertionError(f"echo must not update resources ({uri})")


@pytest.fixture
def echo() -> RegisteredTool:
    registry = Registry()
    plugin.register(registry)
    entry = registry.tool("echo")
    assert entry is not None
    return entry


def make_context() -> Context:
    return Context(request_id="t", message_id=1, peer=None, principal=None, outbound=SilentOutbound(), hub=NoHub())


def test_plugin_registers_only_echo() -> None:
    registry = Registry()
    plugin.register(registry)
    assert plugin.name == "echo"
    assert [tool.name for tool in registry.tools()] == ["echo"]


def test_echo_schema_requires_a_described_string(echo: RegisteredTool) -> None:
    schema = echo.tool.to_wire()["inputSchema"]
    Draft202012Validator.check_schema(schema)
    assert schema["required"] == ["text"]
    assert schema["additionalProperties"] is False
    assert schema["properties"]["text"]["type"] == "string"
    assert schema["properties"]["text"]["description"]
    assert echo.tool.description


def test_echo_validator_rejects_missing_extra_and_non_string_text(echo: RegisteredTool) -> None:
    assert echo.validator.is_valid({"text": "hi"})
    assert not echo.validator.is_valid({})
    assert not echo.validator.is_valid({"text": "hi", "more": 1})
    assert not echo.validator.is_valid({"text": 3})


@pytest.mark.anyio
@pytest.mark.parametrize("value", ["hello", "", "ünïcödé\n\t{}"])
async def test_echo_returns_the_text_unchanged(echo: RegisteredTool, value: str) -> None:
    result = await echo.tool.handler({"text": value}, make_context())
    assert result == [{"type": "text", "text": value}]
