"""`aql_mcp.plugin`, the one public module for plugin authors: every name it promises resolves, and
a plugin written with its names alone (tests/support/greeter.py) serves its operations, a typed
tool, a prompt and a resource through a real `aql-mcp serve`."""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import aql_mcp.plugin
from aql_mcp.main import main
from tests.support.asgi import MCP_HEADERS, initialize_params, rpc
from tests.support.server import ServerProcess, start_server
from tests.support.sse import answer

GREETER = "tests.support.greeter:plugin"
GREETER_SOURCE = Path(__file__).parent / "support" / "greeter.py"
DEADLINE = 20.0


def test_every_name_in_all_resolves_and_is_listed_once() -> None:
    names = aql_mcp.plugin.__all__
    assert len(names) == len(set(names))
    for name in names:
        assert getattr(aql_mcp.plugin, name) is not None, name


def test_the_module_exports_what_a_plugin_needs_for_operations_tools_and_errors() -> None:
    """The names the built-in plugins use from internals, that a third-party equivalent needs too."""
    needed = {
        "Operation", "Params", "Call", "OperationError", "Page", "Outcome", "warning", "deep_merge",
        "Principal", "PluginOperations", "OperationsPlugin", "Plugin", "Registry", "Tool", "Context",
        "Settings", "NOT_FOUND_RESOURCE", "CONFLICT_ALREADY_EXISTS", "CONFLICT_VERSION_MISMATCH",
        "PERMISSION_DENIED", "RATE_LIMIT_QUOTA_EXHAUSTED", "VALIDATION_UNKNOWN_FIELD", "VALIDATION_INVALID_TYPE",
    }  # fmt: skip
    assert needed <= set(aql_mcp.plugin.__all__)
    assert aql_mcp.plugin.NOT_FOUND_RESOURCE == "NOT_FOUND_RESOURCE"


def test_the_example_plugin_imports_nothing_from_aql_mcp_but_the_public_module() -> None:
    tree = ast.parse(GREETER_SOURCE.read_text(encoding="utf-8"))
    modules = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    modules |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    assert {m for m in modules if m and m.startswith("aql_mcp")} == {"aql_mcp.plugin"}


# --- through a real server ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def greeter_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with start_server(tmp_path_factory.mktemp("greeter"), plugins=(GREETER,)) as process:
        yield process


class Session:
    def __init__(self, server: ServerProcess) -> None:
        self.server = server
        headers = {**MCP_HEADERS, "authorization": f"Bearer {server.token()}"}
        response = httpx.post(
            server.url, json=rpc("initialize", initialize_params()), headers=headers, timeout=DEADLINE
        )
        assert response.status_code == 200, response.text
        self.headers = {**headers, "mcp-session-id": response.headers["mcp-session-id"]}
        self.headers["mcp-protocol-version"] = "2025-11-25"
        done = httpx.post(server.url, json=rpc("notifications/initialized", message_id=None), headers=self.headers)
        assert done.status_code == 202

    def result(self, method: str, params: dict[str, Any]) -> Any:
        response = httpx.post(self.server.url, json=rpc(method, params), headers=self.headers, timeout=DEADLINE)
        assert response.status_code == 200, response.text
        body = answer(response)
        assert "error" not in body, body
        return body["result"]

    def operation(self, tool: str, name: str, params: dict[str, Any]) -> dict[str, Any]:
        result = self.result("tools/call", {"name": tool, "arguments": {"operation": name, "params": params}})
        envelope: dict[str, Any] = result["structuredContent"]
        assert json.loads(result["content"][0]["text"]) == envelope
        return envelope


def test_a_plugin_written_with_the_public_module_serves_its_operations(greeter_server: ServerProcess) -> None:
    session = Session(greeter_server)
    envelope = session.operation("mcp_aql_read", "greet", {"name": "Ada", "language": "fr"})
    assert envelope == {"success": True, "data": {"greeting": "Bonjour, Ada!", "asked_by": "tester"}}
    held = session.operation("mcp_aql_delete", "forget_greeting", {"name": "Ada"})
    assert held["error"]["code"] == "CONFIRMATION_REQUIRED"
    token = held["error"]["details"]["confirmation_token"]
    missing = session.operation("mcp_aql_delete", "forget_greeting", {"name": "Ada", "confirmation_token": token})
    assert missing["success"] is False
    assert missing["error"]["code"] == "NOT_FOUND_RESOURCE"
    assert missing["error"]["details"] == {"name": "Ada"}


def test_a_plugin_written_with_the_public_module_serves_its_tool_prompt_and_resource(
    greeter_server: ServerProcess,
) -> None:
    session = Session(greeter_server)
    shouted = session.result("tools/call", {"name": "shout", "arguments": {"words": "hi", "times": 2}})
    assert shouted["structuredContent"] == {"text": "HI HI", "on": "2026-01-01"}
    prompt = session.result("prompts/get", {"name": "welcome", "arguments": {"name": "Bo"}})
    assert prompt["messages"][0]["content"]["type"] == "text"
    [contents] = session.result("resources/read", {"uri": "greeter://about"})["contents"]
    assert contents["mimeType"] == "text/plain"


def test_a_plugin_stops_startup_with_the_public_config_error_and_its_message(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`aql_mcp.plugin.ConfigError` raised by `configure` fails `check-config` (and `serve`) with exit
    code 2 and the plugin's own words, no traceback."""
    monkeypatch.setenv("AQL_MCP_SERVER__PLUGINS", '["tests.support.typed_tools:refusing"]')
    monkeypatch.setenv("AQL_MCP_STORE__PATH", str(tmp_path))
    assert main(["check-config", "--dev"]) == 2
    err = capsys.readouterr().err
    assert "plugins.refusing.region" in err
    assert "Traceback" not in err
