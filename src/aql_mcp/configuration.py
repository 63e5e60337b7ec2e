"""Where the settings come from: the YAML file, the environment, then command-line overrides.

Merged in that order, validated once, then checked for what is only safe on a workstation. This
is the one place that reads the environment (`AQL_MCP_<SECTION>__<NAME>`); an error names the
setting, its variable and the source that set it.
"""

from __future__ import annotations

import difflib
import json
import os
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_settings import BaseSettings, EnvSettingsSource

from aql_mcp.exceptions import ConfigError
from aql_mcp.safeguards import check_safety
from aql_mcp.settings import ENV_PREFIX, Settings


class _MappingEnvSource(EnvSettingsSource):
    """The environment source, reading an injected mapping instead of `os.environ`."""

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str]) -> None:
        self._environ = {k.lower(): v for k, v in environ.items() if k.upper().startswith(ENV_PREFIX)}
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return self._environ


def load_settings(
    config_file: Path | None = None,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
) -> Settings:
    """Build settings from the file, then the environment, then CLI overrides; raise ConfigError."""
    data = _read_yaml(config_file) if config_file else {}
    env = os.environ if environ is None else environ
    _refuse_unknown_sections(env)
    _refuse_undecodable(env)
    try:
        env_data = _MappingEnvSource(Settings, env)()
    except Exception:  # pydantic-settings raises SettingsError for JSON it cannot decode
        raise ConfigError(f"{_undecodable(env)}: not valid JSON (lists and mappings are JSON arrays/objects)") from None
    merged = _deep_merge(_deep_merge(data, env_data), {k: dict(v) for k, v in (overrides or {}).items()})
    try:
        settings = Settings(**merged)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, env, config_file)) from None
    check_safety(settings)
    return settings


def records_dir(environ: Mapping[str, str] | None = None) -> Path | None:
    """Where development servers leave the record `aql-mcp dev-token` reads (auth/dev_key.py): the
    user's state directory of the XDG Base Directory specification, `$XDG_STATE_HOME/aql-mcp`, else
    `~/.local/state/aql-mcp`; None without a home directory."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_STATE_HOME", "")
    if os.path.isabs(base):
        return Path(base) / "aql-mcp"
    try:
        return Path.home() / ".local" / "state" / "aql-mcp"
    except RuntimeError:
        return None


def _refuse_unknown_sections(environ: Mapping[str, str]) -> None:
    """`AQL_MCP_<SECTION>__<NAME>` with a section no setting has is a typo that would silently change
    nothing (`AQL_MCP_LOGGIN__LEVEL`). Variables without `__` are not settings: Kubernetes injects
    `AQL_MCP_PORT` and `AQL_MCP_SERVICE_HOST` for a Service of that name, and the tests read their
    own `AQL_MCP_TEST_*` knobs."""
    sections = set(Settings.model_fields)
    for name in sorted(environ):
        upper = name.upper()
        if not upper.startswith(ENV_PREFIX) or "__" not in upper[len(ENV_PREFIX) :]:
            continue
        section = upper[len(ENV_PREFIX) :].split("__", 1)[0].lower()
        if section not in sections:
            close = difflib.get_close_matches(section, sections, n=1)
            hint = f"did you mean {ENV_PREFIX}{close[0].upper()}__...? " if close else ""
            raise ConfigError(
                f"{upper}: there is no settings section {section!r}; {hint}sections: {', '.join(sorted(sections))}"
            )


def _refuse_undecodable(environ: Mapping[str, str]) -> None:
    """A list or mapping setting comes from the environment as JSON: one that does not decode is
    refused naming its variable and its setting, and what the value should look like, never the
    value itself (it may hold a secret). pydantic-settings' own error names neither."""
    for name in sorted(environ):
        value = environ[name]
        path = setting_path(name)
        shape = json_shape(_annotation(path)) if path and value else None
        if shape is None:
            continue
        try:
            json.loads(value)
        except ValueError as exc:
            where = f"{exc.msg} at character {exc.pos}" if isinstance(exc, json.JSONDecodeError) else "undecodable"
            raise ConfigError(f"{name.upper()} ({'.'.join(path or ())}): not valid JSON ({where}); {shape}") from None


def setting_path(variable: str) -> tuple[str, ...] | None:
    """`AQL_MCP_HTTP__ALLOWED_ORIGINS` -> ("http", "allowed_origins"); None if not a prefixed name."""
    upper = variable.upper()
    if not upper.startswith(ENV_PREFIX) or len(upper) == len(ENV_PREFIX):
        return None
    return tuple(part.lower() for part in upper[len(ENV_PREFIX) :].split("__"))


def _annotation(path: tuple[str, ...] | None) -> Any:
    """The type of the setting at `path` (through sections, nested models and mapping values), or None."""
    current: Any = Settings
    for key in path or ():
        current = optional_removed(current)
        if isinstance(current, type) and issubclass(current, BaseModel):
            field = current.model_fields.get(key)
            if field is None:
                return None
            current = field.annotation
        elif get_origin(current) is dict:
            current = get_args(current)[1]
        else:
            return None
    return optional_removed(current)


def optional_removed(annotation: Any) -> Any:
    """`X` of `X | None`, `Optional[X]` and `Annotated[X, ...]` (of any nesting of them); else the annotation."""
    if get_origin(annotation) is Annotated:
        return optional_removed(get_args(annotation)[0])
    if get_origin(annotation) in (Union, types.UnionType):
        kept = [arg for arg in get_args(annotation) if arg is not type(None)]
        return optional_removed(kept[0]) if len(kept) == 1 else annotation
    return annotation


def json_shape(annotation: Any) -> str | None:
    """How a structured setting (a list, a mapping or a model, optional or annotated or not) is
    written in a variable, or None for a plain one (a string, a number): the one rule for the core
    sections and the plugins' own (plugin_host/sections.py)."""
    plain = optional_removed(annotation)
    origin = get_origin(plain) or plain
    if origin in (list, tuple, set, frozenset):
        return 'a list is a JSON array, e.g. ["a", "b"]'
    if origin is dict or (isinstance(origin, type) and issubclass(origin, BaseModel)):
        return 'a mapping is a JSON object, e.g. {"key": "value"}'
    return None


def env_name(loc: tuple[str | int, ...]) -> str:
    return ENV_PREFIX + "__".join(str(part).upper() for part in loc)


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"config file {path}: cannot be read ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {path}: not valid YAML ({exc})") from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise ConfigError(f"config file {path}: the top level must be a mapping of sections")
    return loaded


def _deep_merge(base: Mapping[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in top.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _describe(exc: ValidationError, environ: Mapping[str, str], config_file: Path | None) -> str:
    lines = []
    upper = {k.upper() for k in environ}
    for error in exc.errors():
        loc = tuple(error["loc"])
        field = ".".join(str(p) for p in loc)
        variable = env_name(loc[:2])
        source = "environment" if variable in upper else (f"config file {config_file}" if config_file else "default")
        lines.append(f"{field} ({variable}, from {source}): {error['msg']}")
    return "invalid settings:\n  " + "\n  ".join(lines)


def _undecodable(environ: Mapping[str, str]) -> str:
    """The variable whose JSON the environment source could not decode, for the error message."""
    for name, value in environ.items():
        if not name.upper().startswith(ENV_PREFIX) or not value.strip().startswith(("[", "{")):
            continue
        try:
            json.loads(value)
        except ValueError:
            return name.upper()
    return "environment"
