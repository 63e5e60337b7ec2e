"""`plugins.<name>`: a plugin's own settings, validated by its model before it registers."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import pytest
from pydantic import BaseModel, ConfigDict, Field

from aql_mcp.configuration import load_settings
from aql_mcp.exceptions import ConfigError
from aql_mcp.plugin_host.loader import load_plugins
from aql_mcp.plugin_host.sections import configure_plugin, validate_section
from aql_mcp.protocol.primitives import Registry
from aql_mcp.settings import Settings
from tests.support.tuned import Tuned, TunedSettings

DEV = {"server": {"dev": True}}


def configured(plugins: dict[str, dict[str, Any]]) -> TunedSettings:
    [plugin] = load_plugins(["tests.support.tuned:plugin"], Registry(), Settings(plugins=plugins))
    assert isinstance(plugin, Tuned)
    return plugin.settings


def test_the_section_is_validated_by_the_plugins_model_and_handed_to_configure() -> None:
    assert configured({"tuned": {"level": 3}}) == TunedSettings(level=3)


def test_no_section_gives_the_models_defaults() -> None:
    assert configured({}) == TunedSettings()


def test_environment_variables_fill_the_section_converted_by_the_model() -> None:
    environ = {"AQL_MCP_PLUGINS__TUNED__LEVEL": "4", "AQL_MCP_PLUGINS__TUNED__LABELS": '["a", "b"]'}
    settings = load_settings(None, environ, DEV)
    [plugin] = load_plugins(["tests.support.tuned:plugin"], Registry(), settings)
    assert isinstance(plugin, Tuned)
    assert plugin.settings == TunedSettings(level=4, labels=("a", "b"))


def test_the_environment_beats_the_config_file(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("plugins:\n  tuned:\n    level: 2\n    labels: [x]\n", encoding="utf-8")
    settings = load_settings(config, {"AQL_MCP_PLUGINS__TUNED__LEVEL": "5"}, DEV)
    assert settings.plugins == {"tuned": {"level": "5", "labels": ["x"]}}


@pytest.mark.parametrize(
    ("section", "setting", "variable"),
    [
        ({"level": 9}, "plugins.tuned.level", "AQL_MCP_PLUGINS__TUNED__LEVEL"),
        ({"levle": 2}, "plugins.tuned.levle", "AQL_MCP_PLUGINS__TUNED__LEVLE"),
        ({"labels": "not json"}, "plugins.tuned.labels", "AQL_MCP_PLUGINS__TUNED__LABELS"),
    ],
)
def test_a_bad_setting_is_refused_naming_the_setting_and_its_variable(
    section: dict[str, Any], setting: str, variable: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        configured({"tuned": section})
    assert setting in str(caught.value)
    assert variable in str(caught.value)


def test_a_refused_setting_stops_loading_before_the_plugin_registers() -> None:
    registry = Registry()
    with pytest.raises(ConfigError):
        load_plugins(["tests.support.tuned:plugin"], registry, Settings(plugins={"tuned": {"level": 0}}))
    assert list(registry.tools()) == []


def test_a_section_for_a_plugin_that_is_not_loaded_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"plugins\.tunde"):
        load_plugins(["tests.support.tuned:plugin"], Registry(), Settings(plugins={"tunde": {"level": 2}}))


def test_a_section_for_a_plugin_without_a_settings_model_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"plugins\.greeter.*no settings"):
        load_plugins(["tests.support.greeter:plugin"], Registry(), Settings(plugins={"greeter": {"x": 1}}))


def test_a_model_that_allows_extra_keys_keeps_them() -> None:
    class Open(BaseModel):
        model_config = ConfigDict(extra="allow")

    assert validate_section("open", Open, {"anything": 1}).model_extra == {"anything": 1}


def test_a_settings_model_that_is_not_a_pydantic_model_is_refused() -> None:
    broken = Tuned()
    broken.settings_model = dict  # type: ignore[assignment]
    with pytest.raises(ConfigError, match="settings_model"):
        configure_plugin(broken, {})


class OptionalShapes(BaseModel):
    names: list[str] | None = None
    limits: Annotated[dict[str, int] | None, Field(description="per name")] = None
    tags: Optional[Annotated[tuple[str, ...], Field(max_length=3)]] = None  # noqa: UP045 (the older spelling too)


def test_optional_and_annotated_lists_and_mappings_are_read_from_the_environments_json() -> None:
    section = {"names": '["a", "b"]', "limits": '{"a": 1}', "tags": '["x"]'}
    assert validate_section("shapes", OptionalShapes, section) == OptionalShapes(
        names=["a", "b"], limits={"a": 1}, tags=("x",)
    )


def test_a_plugin_name_with_a_dash_is_read_from_its_environment_variable() -> None:
    """docs/plugins.md: Kubernetes and `env` set such a variable; the name keeps its dash."""
    settings = load_settings(None, {"AQL_MCP_PLUGINS__MY-PLUGIN__LEVEL": "3"}, DEV)
    assert settings.plugins == {"my-plugin": {"level": "3"}}
