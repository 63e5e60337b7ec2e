"""bench/client.py: the stateless MCP 2026-07-28 `tools/call` that `make bench` sends for its modern rows.

The same builder (`modern_echo`) makes the body wrk sends under load, so a real `aql-mcp serve` with
`mcp.modern_era` on must answer it as a complete result, and the benchmark's first checked call must
stop a target that cannot serve it. Speed is the benchmark's business; nothing here measures it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.asgi import MCP_HEADERS
from tests.support.bench import load_bench_module
from tests.support.server import ServerProcess, start_server

ECHO = "aql_mcp.testing.echo:plugin"
MODERN_ERA = {"AQL_MCP_MCP__MODERN_ERA": "true"}


bench_client = load_bench_module("client")


@pytest.fixture(scope="module")
def modern_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with start_server(tmp_path_factory.mktemp("bench-modern"), env=MODERN_ERA, plugins=(ECHO,)) as process:
        yield process


def test_the_modern_echo_is_answered_complete_without_a_session(modern_server: ServerProcess) -> None:
    """MCP 2026-07-28 basic, "Per-request protocol fields": no initialize first, `_meta` carries them."""
    headers, body = bench_client.modern_echo(41)
    sent = {**headers, "Authorization": f"Bearer {modern_server.token()}", **MCP_HEADERS}

    response = httpx.post(modern_server.url, json=body, headers=sent, timeout=20.0)

    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/json")
    assert "mcp-session-id" not in response.headers
    answer = response.json()
    assert answer["id"] == 41
    assert answer["result"]["resultType"] == "complete"
    assert answer["result"].get("isError") is not True
    assert answer["result"]["content"][0]["text"] == bench_client.TEXT


def test_the_first_checked_call_passes_on_a_modern_server(modern_server: ServerProcess) -> None:
    client = bench_client.McpClient(modern_server.url, headers={"Authorization": f"Bearer {modern_server.token()}"})
    try:
        client.check_modern_echo()
    finally:
        client.close()


def test_the_body_wrk_sends_has_the_id_slot_its_script_fills() -> None:
    """bench/echo_call.lua puts each request's id where the compact body has `"id":0,`."""
    _, body = bench_client.modern_echo(0)

    assert json.dumps(body, separators=(",", ":")).count('"id":0,') == 1


def test_the_first_checked_call_stops_a_server_without_the_modern_era(tmp_path: Path) -> None:
    """A target that cannot serve 2026-07-28 fails the run before any load (bench/README.md)."""
    with start_server(tmp_path, env={"AQL_MCP_MCP__MODERN_ERA": "false"}, plugins=(ECHO,)) as server:
        client = bench_client.McpClient(server.url, headers={"Authorization": f"Bearer {server.token()}"})
        try:
            with pytest.raises(bench_client.BadAnswer):
                client.check_modern_echo()
        finally:
            client.close()
