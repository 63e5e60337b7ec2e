"""The example plugin on its own: its settings model and what it registers. The service loading
it from the installed package, over HTTP, is the main repository's tests/plugins/test_entry_points.py."""

from __future__ import annotations

import pytest
from greeter_plugin import GreeterPlugin, GreeterSettings
from pydantic import ValidationError

from aql_mcp.plugin import Registry


def test_the_greeting_starts_with_the_configured_word() -> None:
    plugin = GreeterPlugin()
    plugin.configure(GreeterSettings(greeting="Hi"))
    assert plugin.greet("Ada") == "Hi, Ada!"


def test_the_default_greeting_is_hello() -> None:
    assert GreeterPlugin().greet("Ada") == "Hello, Ada!"


@pytest.mark.parametrize("section", [{"greting": "Hi"}, {"greeting": ""}])
def test_a_misspelt_or_empty_setting_is_refused(section: dict[str, str]) -> None:
    with pytest.raises(ValidationError):
        GreeterSettings.model_validate(section)


def test_register_adds_the_greeting_tool_with_a_schema() -> None:
    registry = Registry()
    GreeterPlugin().register(registry)
    [tool] = registry.tools()
    assert tool.name == "greeting"
    assert tool.input_schema["required"] == ["name"]
