"""The generated `agent_prompt` as a real `aql-mcp serve` serves it: the MCP-AQL tools' operations
with their parameters' real types, and an example call that works as written on the first try
(corporate §10.4: instructions for each tool, examples)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.support.asgi import MCP_HEADERS, initialize_params, rpc
from tests.support.server import ServerProcess, start_server
from tests.support.sse import answer

JSON_BLOCK = re.compile(r"```json\n(.*?)\n```", re.DOTALL)
DEADLINE = 20.0


@pytest.fixture(scope="module", params=["semantic", "single"])
def builtin_server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """The built-in plugins only, as a fresh deployment serves them, in each endpoint mode."""
    env = {"AQL_MCP_AQL__MODE": request.param}
    with start_server(tmp_path_factory.mktemp(f"guide-{request.param}"), env=env, plugins=()) as process:
        yield process


class Session:
    def __init__(self, server: ServerProcess) -> None:
        self.url = server.url
        headers = {**MCP_HEADERS, "authorization": f"Bearer {server.token()}"}
        opened = httpx.post(self.url, json=rpc("initialize", initialize_params()), headers=headers, timeout=DEADLINE)
        self.headers = {**headers, "mcp-session-id": opened.headers["mcp-session-id"]}
        self.headers["mcp-protocol-version"] = "2025-11-25"
        httpx.post(self.url, json=rpc("notifications/initialized", message_id=None), headers=self.headers)

    def send(self, message: dict[str, Any]) -> dict[str, Any]:
        response = httpx.post(self.url, content=json.dumps(message), headers=self.headers, timeout=DEADLINE)
        assert response.status_code == 200, response.text
        return answer(response)

    def prompt(self) -> str:
        result = self.send(rpc("prompts/get", {"name": "agent_prompt"}))["result"]
        return str(result["messages"][0]["content"]["text"])


def test_the_example_call_of_the_agent_prompt_succeeds_as_written(builtin_server: ServerProcess) -> None:
    session = Session(builtin_server)
    [example] = JSON_BLOCK.findall(session.prompt())
    reply = session.send(json.loads(example))
    result = reply["result"]
    assert result.get("isError", False) is False
    assert result["structuredContent"]["success"] is True


def test_the_agent_prompt_types_the_endpoint_parameters_and_each_operations_parameters(
    builtin_server: ServerProcess,
) -> None:
    text = Session(builtin_server).prompt()
    assert "`operation` (string, optional)" in text
    assert "`params` (object, optional)" in text
    assert "`operations` (array of object, optional)" in text
    assert "(any," not in text
    assert "- `introspect`: " in text
    assert '`query` (string, required, one of "operations", "types")' in text
    assert "`collection` (string, required)" in text
    assert "`first` (integer, optional, default 20)" in text
