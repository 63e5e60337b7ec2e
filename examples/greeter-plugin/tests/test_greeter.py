"""The example plugin on its own, through the real app in process (`aql_mcp.testing.client`). The
service loading it from the installed package, over HTTP, is the main repository's
tests/plugin_host/test_entry_points.py."""

from __future__ import annotations

import pytest
from greeter_plugin import GreeterPlugin, GreeterSettings
from pydantic import ValidationError

from aql_mcp.testing.client import plugin_client


@pytest.mark.anyio
async def test_the_operation_and_the_tool_greet_with_the_configured_word() -> None:
    # The installed package's own entry point stays out (plugin_client's default): one greeter.
    async with plugin_client(GreeterPlugin(), settings={"plugins": {"greeter": {"greeting": "Hi"}}}) as client:
        envelope = await client.operation("greet", {"name": "Ada"})
        result = await client.call_tool("greeting", {"name": "Ada"})
    assert envelope == {"success": True, "data": {"greeting": "Hi, Ada!"}}
    assert result["content"][0]["text"] == "Hi, Ada!"


@pytest.mark.anyio
async def test_a_missing_name_is_refused_as_invalid() -> None:
    async with plugin_client(GreeterPlugin()) as client:
        envelope = await client.operation("greet", {})
    assert envelope["error"]["code"].startswith("VALIDATION_")


@pytest.mark.parametrize("section", [{"greting": "Hi"}, {"greeting": ""}])
def test_a_misspelt_or_empty_setting_is_refused(section: dict[str, str]) -> None:
    with pytest.raises(ValidationError):
        GreeterSettings.model_validate(section)
