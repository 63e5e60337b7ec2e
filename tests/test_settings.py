import re
import subprocess
import sys
from itertools import pairwise
from pathlib import Path
from typing import Any, get_origin

import pytest
import yaml
from pydantic import BaseModel, ValidationError

from aql_mcp.configuration import load_settings
from aql_mcp.exceptions import ConfigError
from aql_mcp.settings import BUILTIN_PLUGINS, Settings, field_defaults

DEV: dict[str, dict[str, Any]] = {"server": {"dev": True}}
DEFAULT_YAML = Path(__file__).resolve().parent.parent / "config" / "default.yaml"
SETTING_KEY = re.compile(r"^(?P<indent>\s+)(?P<key>[a-z0-9_]+):")


def write_config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def refusal(
    environ: dict[str, str] | None = None,
    overrides: dict[str, dict[str, Any]] | None = None,
    config_file: Path | None = None,
) -> str:
    with pytest.raises(ConfigError) as caught:
        load_settings(config_file, environ or {}, overrides)
    return str(caught.value)


def test_file_values_are_read(tmp_path: Path) -> None:
    config = write_config(tmp_path, "server:\n  dev: true\n  port: 9001\nlogging:\n  level: debug\n")
    settings = load_settings(config, {})
    assert settings.server.port == 9001
    assert settings.logging.level == "debug"


def test_environment_values_are_read_with_lists_as_json_arrays() -> None:
    environ = {"AQL_MCP_SERVER__PORT": "9002", "AQL_MCP_HTTP__ALLOWED_ORIGINS": '["https://a.example"]'}
    settings = load_settings(None, environ, DEV)
    assert settings.server.port == 9002
    assert settings.http.allowed_origins == ("https://a.example",)


def test_environment_beats_the_file(tmp_path: Path) -> None:
    config = write_config(tmp_path, "server:\n  dev: true\n  port: 9000\n  name: from-file\n")
    settings = load_settings(config, {"AQL_MCP_SERVER__PORT": "9100"})
    assert settings.server.port == 9100
    assert settings.server.name == "from-file"


def test_overrides_beat_the_environment() -> None:
    settings = load_settings(None, {"AQL_MCP_SERVER__PORT": "9100"}, {"server": {"dev": True, "port": 9200}})
    assert settings.server.port == 9200


def test_unrelated_environment_variables_are_ignored() -> None:
    # Kubernetes injects <SERVICE>_PORT / <SERVICE>_SERVICE_HOST for a Service named aql-mcp.
    environ = {"AQL_MCP_PORT": "tcp://10.0.0.1:8000", "AQL_MCP_SERVICE_HOST": "10.0.0.1", "HOME": "/root"}
    assert load_settings(None, environ, DEV).server.port == 8000


def test_a_variable_with_a_typo_in_its_section_is_refused_not_ignored() -> None:
    message = refusal({"AQL_MCP_LOGGIN__LEVEL": "debug"}, DEV)
    assert "AQL_MCP_LOGGIN__LEVEL" in message
    assert "logging" in message
    assert "AQL_MCP_LOGGING__" in message  # the closest section, as a variable to copy


def test_a_section_typo_far_from_every_section_gets_no_suggestion() -> None:
    message = refusal({"AQL_MCP_ZZZZZZ__LEVEL": "debug"}, DEV)
    assert "AQL_MCP_ZZZZZZ__LEVEL" in message
    assert "did you mean" not in message


def test_settings_are_frozen() -> None:
    settings = load_settings(None, {}, DEV)
    with pytest.raises(ValidationError):
        settings.server = settings.server  # type: ignore[misc]


@pytest.mark.parametrize("port", ["abc", "70000", "0"])
def test_bad_port_is_refused_naming_the_setting_and_its_variable(port: str) -> None:
    message = refusal({"AQL_MCP_SERVER__PORT": port}, DEV)
    assert "server.port" in message
    assert "AQL_MCP_SERVER__PORT" in message


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("AQL_MCP_STORE__TENANT_SHARE", "0"),
        ("AQL_MCP_STORE__TENANT_SHARE", "1.5"),
        ("AQL_MCP_STORE__LISTING_SCAN_ROWS", "0"),
    ],
)
def test_a_fair_store_setting_out_of_range_is_refused_naming_its_variable(variable: str, value: str) -> None:
    message = refusal({variable: value}, DEV)
    assert variable in message


@pytest.mark.parametrize("value", ["0", "-1", "65", "abc"])
def test_a_scan_concurrency_out_of_range_is_refused_at_startup_naming_it(value: str) -> None:
    """At least one scan slot (docs/store.md, "Scan slots"): none would refuse every scanning listing."""
    message = refusal({"AQL_MCP_STORE__SCAN_CONCURRENCY": value}, DEV)
    assert "store.scan_concurrency" in message
    assert "AQL_MCP_STORE__SCAN_CONCURRENCY" in message


def test_a_scan_concurrency_of_zero_in_the_file_is_refused_saying_what_it_must_be(tmp_path: Path) -> None:
    message = refusal(config_file=write_config(tmp_path, "server:\n  dev: true\nstore:\n  scan_concurrency: 0\n"))
    assert "store.scan_concurrency" in message
    assert "greater than or equal to 1" in message


def test_bad_port_in_the_file_is_refused_naming_the_setting_and_its_variable(tmp_path: Path) -> None:
    config = write_config(tmp_path, "server:\n  dev: true\n  port: abc\n")
    message = refusal(config_file=config)
    assert "server.port" in message
    assert "AQL_MCP_SERVER__PORT" in message


@pytest.mark.parametrize("name", ["Bad Name", "1abc", "aql_mcp", "Aql", ""])
def test_server_name_that_is_not_a_uri_scheme_is_refused(name: str) -> None:
    message = refusal({"AQL_MCP_SERVER__NAME": name}, DEV)
    assert "server.name" in message
    assert "AQL_MCP_SERVER__NAME" in message


def test_server_name_with_a_trailing_newline_is_refused() -> None:
    refusal({"AQL_MCP_SERVER__NAME": "aql-mcp\n"}, DEV)


@pytest.mark.parametrize("name", ["aql-mcp", "corp.agents", "x+y", "a1"])
def test_server_name_that_is_a_uri_scheme_is_accepted(name: str) -> None:
    assert load_settings(None, {"AQL_MCP_SERVER__NAME": name}, DEV).server.name == name


def test_malformed_json_list_in_the_environment_is_refused() -> None:
    message = refusal({"AQL_MCP_HTTP__ALLOWED_ORIGINS": '["https://a.example"'}, DEV)
    assert "AQL_MCP_HTTP" in message


def test_malformed_json_list_in_the_environment_is_refused_naming_its_variable() -> None:
    message = refusal({"AQL_MCP_HTTP__ALLOWED_ORIGINS": "[not json"}, DEV)
    assert "AQL_MCP_HTTP__ALLOWED_ORIGINS" in message


def structured_settings() -> list[tuple[str, ...]]:
    """Every setting written as JSON in a variable (lists and mappings), nested models included."""
    found: list[tuple[str, ...]] = []

    def walk(model: type[BaseModel], path: tuple[str, ...]) -> None:
        for name, field in model.model_fields.items():
            annotation = field.annotation
            if isinstance(annotation, type) and issubclass(annotation, BaseModel):
                found.append((*path, name))
                walk(annotation, (*path, name))
            elif get_origin(annotation) in (tuple, list, dict):
                found.append((*path, name))

    for section, info in Settings.model_fields.items():
        if isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel):
            walk(info.annotation, (section,))  # `plugins` is a mapping each plugin's model reads
    return [path for path in found if len(path) > 1]


STRUCTURED = structured_settings()


def test_the_structured_settings_are_found() -> None:
    assert ("http", "allowed_origins") in STRUCTURED
    assert ("auth", "policy", "tools") in STRUCTURED
    assert ("auth", "opaque_tokens") in STRUCTURED


@pytest.mark.parametrize("path", STRUCTURED, ids=".".join)
@pytest.mark.parametrize("value", ["[http://x", "http://x", '{"a": ', "not json"])
def test_undecodable_json_names_its_variable_and_setting_never_the_value(path: tuple[str, ...], value: str) -> None:
    variable = "AQL_MCP_" + "__".join(part.upper() for part in path)
    message = refusal({variable: value}, DEV)
    assert variable in message
    assert ".".join(path) in message
    assert value not in message
    assert "JSON" in message


def test_a_whole_section_as_undecodable_json_names_its_variable() -> None:
    message = refusal({"AQL_MCP_AUTH": "{"}, DEV)
    assert "AQL_MCP_AUTH (auth)" in message


def test_a_list_inside_a_mapping_setting_is_checked_too() -> None:
    message = refusal({"AQL_MCP_AUTH__POLICY__TOOLS__ECHO": "[mcp"}, DEV)
    assert "AQL_MCP_AUTH__POLICY__TOOLS__ECHO" in message


def test_plain_settings_are_not_taken_for_json() -> None:
    environ = {"AQL_MCP_SERVER__NAME": "svc", "AQL_MCP_AQL__PLUGIN_TRUST__X": "certified", "AQL_MCP_PORT": "tcp://x"}
    settings = load_settings(None, environ, DEV)
    assert settings.server.name == "svc"
    assert settings.aql.plugin_trust == {"x": "certified"}


def test_origin_that_is_not_scheme_host_port_is_refused() -> None:
    message = refusal({"AQL_MCP_HTTP__ALLOWED_ORIGINS": '["https://a.example/path"]'}, DEV)
    assert "AQL_MCP_HTTP__ALLOWED_ORIGINS" in message


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("server:\n  dev: true\n  colour: red\n", "server.colour"),
        ("server:\n  dev: true\nbogus:\n  a: 1\n", "bogus"),
    ],
)
def test_unknown_key_in_the_file_is_refused_naming_it(tmp_path: Path, text: str, key: str) -> None:
    message = refusal(config_file=write_config(tmp_path, text))
    assert key in message


def test_unknown_setting_in_the_environment_is_refused() -> None:
    message = refusal({"AQL_MCP_SERVER__COLOUR": "red"}, DEV)
    assert "AQL_MCP_SERVER__COLOUR" in message


def test_file_that_is_not_a_mapping_is_refused(tmp_path: Path) -> None:
    refusal(config_file=write_config(tmp_path, "- server\n"))


def test_file_that_is_not_yaml_is_refused(tmp_path: Path) -> None:
    refusal(config_file=write_config(tmp_path, "server: [unclosed\n"))


def test_missing_file_is_refused(tmp_path: Path) -> None:
    refusal(overrides=DEV, config_file=tmp_path / "missing.yaml")


def test_empty_file_means_defaults(tmp_path: Path) -> None:
    settings = load_settings(write_config(tmp_path, ""), {}, DEV)
    assert settings.server.port == 8000


def test_development_mode_defaults_allowed_hosts_to_loopback_with_the_port() -> None:
    settings = load_settings(None, {"AQL_MCP_SERVER__PORT": "9123"}, DEV)
    assert set(settings.allowed_hosts) == {
        "127.0.0.1",
        "127.0.0.1:9123",
        "localhost",
        "localhost:9123",
        "[::1]",
        "[::1]:9123",
    }


def test_development_mode_defaults_allowed_origins_to_loopback_on_the_port() -> None:
    settings = load_settings(None, {"AQL_MCP_SERVER__PORT": "9123"}, DEV)
    assert set(settings.allowed_origins) == {"http://127.0.0.1:9123", "http://localhost:9123", "http://[::1]:9123"}


def test_configured_allow_lists_replace_the_development_defaults() -> None:
    environ = {
        "AQL_MCP_HTTP__ALLOWED_ORIGINS": '["https://a.example"]',
        "AQL_MCP_HTTP__ALLOWED_HOSTS": '["a.example"]',
    }
    settings = load_settings(None, environ, DEV)
    assert settings.allowed_origins == ("https://a.example",)
    assert settings.allowed_hosts == ("a.example",)


def test_issuer_and_audience_default_to_the_base_url() -> None:
    settings = load_settings(None, {"AQL_MCP_SERVER__PORT": "9123"}, DEV)
    assert settings.issuer == "http://127.0.0.1:9123"
    assert settings.audience == "http://127.0.0.1:9123/mcp"


def test_public_url_sets_the_base_url_without_a_trailing_slash() -> None:
    settings = load_settings(None, {"AQL_MCP_SERVER__PUBLIC_URL": "https://agents.example.com/"}, DEV)
    assert settings.base_url == "https://agents.example.com"
    assert settings.audience == "https://agents.example.com/mcp"


def test_plugin_paths_are_builtin_then_extra_without_duplicates() -> None:
    environ = {
        "AQL_MCP_SERVER__BUILTIN_PLUGINS": '["pkg.a:plugin", "pkg.b:plugin"]',
        "AQL_MCP_SERVER__PLUGINS": '["pkg.c:plugin", "pkg.a:plugin"]',
    }
    settings = load_settings(None, environ, DEV)
    assert settings.plugin_paths == ("pkg.a:plugin", "pkg.b:plugin", "pkg.c:plugin")


def test_plugin_listed_twice_among_the_extras_is_loaded_once() -> None:
    settings = load_settings(None, {"AQL_MCP_SERVER__PLUGINS": '["pkg.c:plugin", "pkg.c:plugin"]'}, DEV)
    assert settings.plugin_paths == (*BUILTIN_PLUGINS, "pkg.c:plugin")


def test_default_yaml_lists_every_setting_with_its_default() -> None:
    documented = yaml.safe_load(DEFAULT_YAML.read_text(encoding="utf-8"))
    assert documented == field_defaults()
    assert list(documented) == list(Settings.model_fields)


def test_default_yaml_comments_every_setting() -> None:
    lines = DEFAULT_YAML.read_text(encoding="utf-8").splitlines()
    uncommented = [
        match["key"]
        for previous, line in pairwise(lines)
        if (match := SETTING_KEY.match(line)) and not previous.strip().startswith("#")
    ]
    keys = [m["key"] for line in lines if (m := SETTING_KEY.match(line)) and len(m["indent"]) == 2]
    assert sum(len(section) for section in field_defaults().values()) == len(keys)
    assert uncommented == []


def test_default_yaml_is_a_valid_configuration_in_development_mode() -> None:
    settings = load_settings(DEFAULT_YAML, {}, DEV)
    assert settings.server.name == "aql-mcp"


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("AQL_MCP_HTTP__MAX_HEADER_BYTES", "100"),
        ("AQL_MCP_HTTP__MAX_HEADERS", "5000"),
        ("AQL_MCP_HTTP__HEADER_TIMEOUT_SECONDS", "0"),
        ("AQL_MCP_HTTP__BODY_TIMEOUT_SECONDS", "-1"),
        ("AQL_MCP_HTTP__IDLE_TIMEOUT_SECONDS", "abc"),
        ("AQL_MCP_HTTP__MAX_CONNECTIONS", "3"),
    ],
)
def test_connection_limits_out_of_range_are_refused_naming_their_variable(variable: str, value: str) -> None:
    assert variable in refusal({variable: value}, DEV)


def test_the_settings_never_import_the_mcp_aql_layer() -> None:
    """Imports flow one way: the settings sit below `operations/` (trust levels are defined here)."""
    probe = "import sys, aql_mcp.settings; print(sorted(m for m in sys.modules if m.startswith('aql_mcp.')))"
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert "aql_mcp.operations" not in loaded
    assert "aql_mcp.plugins" not in loaded
