"""A plugin's own settings: the `plugins.<name>` section, validated by the plugin's own model.

The contract (docs/plugins.md, "Plugin settings"): a plugin that takes settings declares
`settings_model`, a pydantic model class, and `configure(settings)`. At startup, before the plugin
registers anything, the loader validates `plugins.<name>` (config file, then the environment
`AQL_MCP_PLUGINS__<NAME>__<FIELD>`, then command-line overrides, merged as every other section)
against that model and calls `configure` with the instance. A model that says nothing about extra
keys forbids them, as every core section does: an unknown key is a typo that would change nothing.

Refused, each naming the setting and its variable: a section for a plugin that is not loaded, a
section for a plugin without a model, an unknown key, and a value the model rejects.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from aql_mcp.configuration import json_shape
from aql_mcp.exceptions import ConfigError
from aql_mcp.plugin_host.contracts import ConfigurablePlugin
from aql_mcp.settings import ENV_PREFIX

# Field types the environment carries as JSON text, as for the core sections.


def env_variable(name: str, field: str | None = None) -> str:
    """`AQL_MCP_PLUGINS__GREETER__GREETING`: where a plugin setting comes from in the environment."""
    parts = ["PLUGINS", name, *([field] if field else [])]
    return ENV_PREFIX + "__".join(part.upper() for part in parts)


def refuse_unknown_sections(sections: Mapping[str, object], loaded: Iterable[object]) -> None:
    """`plugins.<name>` for a plugin that is not loaded, or that takes no settings, would change nothing."""
    plugins = {getattr(plugin, "name", None): plugin for plugin in loaded}
    for name in sorted(sections):
        if name not in plugins:
            loaded_names = ", ".join(sorted(str(n) for n in plugins)) or "none"
            raise ConfigError(
                f"plugins.{name} ({env_variable(name)}__...): no loaded plugin is named {name!r}; "
                f"loaded: {loaded_names}"
            )
        if not isinstance(plugins[name], ConfigurablePlugin):
            raise ConfigError(
                f"plugins.{name} ({env_variable(name)}__...): plugin {name!r} takes no settings "
                "(it declares no settings_model)"
            )


def configure_plugin(plugin: object, sections: Mapping[str, Mapping[str, Any]]) -> None:
    """Validate the plugin's section against its model and hand it the instance; nothing for a
    plugin without a model."""
    if not isinstance(plugin, ConfigurablePlugin):
        return
    name = str(getattr(plugin, "name", ""))
    model = plugin.settings_model
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise ConfigError(f"plugin {name}: settings_model must be a pydantic model class, not {model!r}")
    validated = validate_section(name, model, sections.get(name) or {})
    try:
        plugin.configure(validated)
    except ConfigError as exc:
        # The plugin's own refusal (aql_mcp.plugin.ConfigError): its words are meant for the operator.
        raise ConfigError(f"plugin {name}: {exc}") from None
    except Exception as exc:
        # Only the type: the message or a traceback could quote a secret setting's value.
        raise ConfigError(f"plugin {name}: configure failed ({type(exc).__name__})") from None


def validate_section(name: str, model: type[BaseModel], section: Mapping[str, Any]) -> BaseModel:
    """The model's instance for `plugins.<name>`, or a ConfigError naming every bad field."""
    data = _decode_json_fields(model, section)
    unknown = sorted(set(data) - _keys(model)) if model.model_config.get("extra") is None else []
    problems = [f"plugins.{name}.{key} ({env_variable(name, key)}): not a setting of plugin {name}" for key in unknown]
    if not problems:
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            problems = [_describe(name, error) for error in exc.errors()]
    raise ConfigError("invalid plugin settings:\n  " + "\n  ".join(problems))


def _describe(name: str, error: Mapping[str, Any]) -> str:
    loc = [str(part) for part in error["loc"]]
    field = loc[0] if loc else None
    where = ".".join(["plugins", name, *loc])
    return f"{where} ({env_variable(name, field)}): {error['msg']}"


def _keys(model: type[BaseModel]) -> set[str]:
    keys = set(model.model_fields)
    keys.update(info.alias for info in model.model_fields.values() if info.alias)
    return keys


def _decode_json_fields(model: type[BaseModel], section: Mapping[str, Any]) -> dict[str, Any]:
    """The environment holds text: a list or mapping field's value there is JSON, as for the core
    sections (`AQL_MCP_PLUGINS__GREETER__NAMES='["a", "b"]'`). Text that is not JSON is left for
    the model to refuse."""
    data = dict(section)
    for key, info in model.model_fields.items():
        value = data.get(key)
        if not isinstance(value, str) or json_shape(info.annotation) is None:
            continue
        try:
            data[key] = json.loads(value)
        except ValueError:
            continue
    return data
