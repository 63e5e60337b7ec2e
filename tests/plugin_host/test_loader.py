from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from structlog.testing import capture_logs

from aql_mcp.exceptions import ConfigError
from aql_mcp.plugin_host.contracts import Plugin
from aql_mcp.plugin_host.loader import import_plugin, load_plugins
from aql_mcp.protocol.content import Content
from aql_mcp.protocol.context import Context
from aql_mcp.protocol.primitives import Prompt, Registry, Resource, ResourceTemplate, Tool, ToolOutput
from aql_mcp.settings import Settings
from aql_mcp.store.sqlite.store import SqliteStore

HERE = "tests.plugin_host.test_loader"


async def answer(arguments: dict[str, Any], ctx: Context) -> ToolOutput:
    return "ok"


async def prompt_text(arguments: dict[str, str], ctx: Context) -> list[Content]:
    return []


async def read(uri: str, ctx: Context) -> list[Content]:
    return []


async def read_template(uri: str, variables: dict[str, str], ctx: Context) -> list[Content]:
    return []


@dataclass
class TinyPlugin:
    """A plugin that registers the names it is given."""

    name: str
    tools: tuple[str, ...] = ()
    prompts: tuple[str, ...] = ()
    resources: tuple[str, ...] = ()
    templates: tuple[str, ...] = ()

    def register(self, registry: Registry) -> None:
        for name in self.tools:
            registry.add_tool(Tool(name, f"{name} from {self.name}", answer))
        for name in self.prompts:
            registry.add_prompt(Prompt(name, f"{name} from {self.name}", prompt_text))
        for uri in self.resources:
            registry.add_resource(Resource(uri, uri, read))
        for uri_template in self.templates:
            registry.add_resource_template(ResourceTemplate(uri_template, uri_template, read_template))


first_plugin = TinyPlugin(
    "first",
    tools=("shared_tool",),
    prompts=("shared_prompt",),
    resources=("test://shared",),
    templates=("test://t/{id}",),
)
second_plugin = TinyPlugin("second", tools=("shared_tool",))
prompt_twin = TinyPlugin("prompt-twin", prompts=("shared_prompt",))
resource_twin = TinyPlugin("resource-twin", resources=("test://shared",))
template_twin = TinyPlugin("template-twin", templates=("test://t/{id}",))
distinct_plugin = TinyPlugin("distinct", tools=("own_tool",), prompts=("own_prompt",), resources=("test://own",))
not_a_plugin = SimpleNamespace(name="nameless-register")
no_name = SimpleNamespace(register=lambda registry: None)
bad_tool_name_plugin = TinyPlugin("bad-names", tools=("Bad-Name",))


def make_plugin(settings: object) -> TinyPlugin:
    return TinyPlugin("made", tools=("made_tool",))


def make_nothing(settings: object) -> object:
    return object()


def make_broken(settings: object) -> TinyPlugin:
    raise RuntimeError("factory failed")


@pytest.mark.parametrize(
    ("twin", "name"),
    [
        ("second_plugin", "second"),
        ("prompt_twin", "prompt-twin"),
        ("resource_twin", "resource-twin"),
        ("template_twin", "template-twin"),
    ],
)
def test_duplicate_name_fails_naming_both_plugins(twin: str, name: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_plugins([f"{HERE}:first_plugin", f"{HERE}:{twin}"], Registry())
    message = str(caught.value)
    assert "first" in message
    assert name in message


def test_plugins_with_distinct_names_all_register() -> None:
    registry = Registry()
    plugins = load_plugins([f"{HERE}:first_plugin", f"{HERE}:distinct_plugin"], registry)
    assert [p.name for p in plugins] == ["first", "distinct"]
    assert [t.name for t in registry.tools()] == ["shared_tool", "own_tool"]
    assert [p.name for p in registry.prompts()] == ["shared_prompt", "own_prompt"]
    assert registry.resolve("test://own") is not None
    assert registry.resolve("test://t/9") is not None


def test_import_string_names_the_same_object() -> None:
    assert import_plugin(f"{HERE}:first_plugin") is first_plugin


def test_factory_is_called_for_its_plugin() -> None:
    registry = Registry()
    plugins = load_plugins([f"{HERE}:make_plugin"], registry)
    assert [p.name for p in plugins] == ["made"]
    assert registry.tool("made_tool") is not None


def test_loaded_plugin_satisfies_the_plugin_contract() -> None:
    assert isinstance(import_plugin(f"{HERE}:distinct_plugin"), Plugin)


def test_no_plugins_register_nothing() -> None:
    registry = Registry()
    assert load_plugins([], registry) == []
    assert list(registry.tools()) == []


def test_plugin_with_a_bad_tool_name_is_refused() -> None:
    with pytest.raises(ConfigError):
        load_plugins([f"{HERE}:bad_tool_name_plugin"], Registry())


@pytest.mark.parametrize(
    "path",
    [
        "nocolon",
        ":first_plugin",
        f"{HERE}:",
        "missing.module:x",
        "json:nothing",
        f"{HERE}:not_a_plugin",
        f"{HERE}:no_name",
        f"{HERE}:make_nothing",
    ],
)
def test_bad_import_string_is_refused(path: str) -> None:
    with pytest.raises(ConfigError) as caught:
        import_plugin(path)
    assert path in str(caught.value)


def test_bad_import_string_stops_loading_before_any_plugin_registers() -> None:
    registry = Registry()
    with pytest.raises(ConfigError):
        load_plugins([f"{HERE}:distinct_plugin", "missing.module:x"], registry)
    assert list(registry.tools()) == []


def test_callable_that_is_not_a_plugin_factory_is_refused() -> None:
    with pytest.raises(ConfigError):
        import_plugin("json:loads")


def test_factory_that_fails_is_refused_naming_the_plugin() -> None:
    with pytest.raises(ConfigError) as caught:
        import_plugin(f"{HERE}:make_broken")
    assert f"{HERE}:make_broken" in str(caught.value)


def test_a_trust_override_for_a_plugin_that_is_not_loaded_fails_at_startup(tmp_path: Path) -> None:
    """A misspelt override would silently change nothing; the error names the setting."""
    settings = Settings(aql={"plugin_trust": {"recrods": "validated"}})
    with pytest.raises(ConfigError, match=r"aql\.plugin_trust.*recrods"):
        load_plugins(["aql_mcp.plugins.records:plugin"], Registry(), settings, SqliteStore(tmp_path / "s"))


def test_a_plugin_runs_with_the_operators_trust_and_the_lowering_is_logged(tmp_path: Path) -> None:
    plugin = "tests.support.self_certified:plugin"
    registry = Registry()
    settings = Settings(aql={"max_trust": "validated"})
    with capture_logs() as logs:
        load_plugins([plugin, "aql_mcp.plugins.records:plugin"], registry, settings, SqliteStore(tmp_path / "s"))
    changed = [entry for entry in logs if entry["event"] == "plugin_trust_changed"]
    assert [(e["plugin"], e["declared"], e["effective"], e["setting"]) for e in changed] == [
        ("self-certified", "certified", "validated", "aql.max_trust"),
        ("records", "community_reviewed", "validated", "aql.max_trust"),
    ]
