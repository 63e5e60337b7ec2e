"""scripts/nginx.sh and the site example deploy/nginx/aql-mcp.conf: Debian's nginx in front of a
real server (docs/gateway.md)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.modern import MODERN, modern_body, modern_headers
from tests.support.nginx import SCRIPT, Gateway, running_gateway
from tests.support.server import ServerProcess, start_server

# One stateless modern-era request: no session to open first, so each call stands alone.
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientInfo": {"name": "nginx-test", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
LIST_TOOLS = modern_body("tools/list", None, META, 1)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with start_server(tmp_path_factory.mktemp("nginx-upstream")) as process:
        yield process


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, server: ServerProcess) -> Iterator[Gateway]:
    with running_gateway(tmp_path_factory.mktemp("nginx"), [server.port]) as running:
        yield running


def headers(server: ServerProcess) -> dict[str, str]:
    return modern_headers(server.token(), "tools/list")


def test_without_a_command_it_prints_its_usage_and_fails() -> None:
    result = subprocess.run([str(SCRIPT)], capture_output=True, text=True, check=False, timeout=30)
    assert result.returncode == 1
    assert "usage" in result.stderr


def test_start_refuses_a_configuration_nginx_rejects(tmp_path: Path) -> None:
    (tmp_path / "nginx.conf").write_text("events {}\nhttp { no_such_directive on; }\n", encoding="utf-8")
    result = subprocess.run([str(SCRIPT), "start", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert "no_such_directive" in result.stderr
    assert not (tmp_path / "nginx.pid").exists()


def test_a_call_goes_through_the_gateway(gateway: Gateway, server: ServerProcess) -> None:
    response = httpx.post(gateway.url, json=LIST_TOOLS, headers=headers(server), timeout=30)
    assert response.status_code == 200, response.text
    assert response.json()["result"]["tools"]
    assert gateway.logged(f"upstream=127.0.0.1:{server.port}")


def test_probes_pass_and_metrics_stay_inside(gateway: Gateway) -> None:
    assert httpx.get(f"{gateway.base}/health", timeout=30).status_code == 200
    assert httpx.get(f"{gateway.base}/ready", timeout=30).status_code == 200
    assert httpx.get(f"{gateway.base}/metrics", timeout=30).status_code == 404


def test_reload_moves_traffic_to_the_new_upstreams(gateway: Gateway, server: ServerProcess, tmp_path: Path) -> None:
    with start_server(tmp_path) as second:
        gateway.set_upstreams([second.port])
        try:
            mark = len(gateway.access_log())
            # The old worker drains while the new one answers: only new connections are sure to use it.
            response = httpx.post(gateway.url, json=LIST_TOOLS, headers=headers(second), timeout=30)
            assert response.status_code == 200, response.text
            assert gateway.logged(f"upstream=127.0.0.1:{second.port}", since=mark)
        finally:
            gateway.set_upstreams([server.port])
