"""Host allow-list: the DNS-rebinding defence on /mcp and the page, never on the probes."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from aql_mcp.auth.dev_issuer import DevIssuer
from aql_mcp.settings import Settings
from tests.support.asgi import MCP_HEADERS, asgi_client, dev_settings, rpc

pytestmark = pytest.mark.anyio


def mint(settings: Settings) -> str:
    issuer = DevIssuer(state_dir=settings.store.path, issuer=settings.issuer, audience=settings.audience)
    return issuer.mint(subject="tester", scopes=["mcp"], ttl=600)


def assert_misdirected(response: httpx.Response) -> None:
    assert response.status_code == 421, response.text
    error = response.json()["error"]
    assert error["code"] == -32600
    assert error["data"]["requestId"] == response.headers["x-request-id"]


async def test_foreign_host_on_mcp_is_421_before_authentication(client: httpx.AsyncClient) -> None:
    response = await client.post("/mcp", json=rpc("ping"), headers={**MCP_HEADERS, "host": "evil.example.com"})
    assert_misdirected(response)
    assert "www-authenticate" not in response.headers


async def test_foreign_host_on_mcp_with_a_token_is_421(client: httpx.AsyncClient, token: str) -> None:
    headers = {**MCP_HEADERS, "authorization": f"Bearer {token}", "host": "evil.example.com"}
    response = await client.post("/mcp", json=rpc("ping"), headers=headers)
    assert_misdirected(response)
    assert token not in response.text


async def test_foreign_host_on_the_service_page_is_421(client: httpx.AsyncClient) -> None:
    response = await client.get("/", headers={"host": "evil.example.com"})
    assert_misdirected(response)


@pytest.mark.parametrize("path", ["/health", "/ready"])
async def test_probes_answer_any_host(client: httpx.AsyncClient, path: str) -> None:
    """Kubelet probes reach the pod by its IP: the Host list never applies to them."""
    response = await client.get(path, headers={"host": "10.1.2.3:8000"})
    assert response.status_code == 200
    other = await client.get(path, headers={"host": "evil.example.com"})
    assert other.status_code == 200


@pytest.mark.parametrize("host", ["127.0.0.1:8000", "localhost:8000", "LOCALHOST:8000", "127.0.0.1"])
async def test_dev_mode_accepts_loopback_hosts(client: httpx.AsyncClient, token: str, host: str) -> None:
    headers = {**MCP_HEADERS, "authorization": f"Bearer {token}", "host": host}
    response = await client.post("/mcp", json=rpc("ping"), headers=headers)
    assert response.status_code == 200, response.text


async def test_explicit_allowed_hosts_replace_the_loopback_defaults(tmp_path: Path) -> None:
    settings = dev_settings(tmp_path, http={"allowed_hosts": ["mcp.example.com"]})
    token = mint(settings)
    headers = {**MCP_HEADERS, "authorization": f"Bearer {token}"}
    async with asgi_client(settings) as http:
        listed = await http.post("/mcp", json=rpc("ping"), headers={**headers, "host": "mcp.example.com"})
        upper = await http.post("/mcp", json=rpc("ping"), headers={**headers, "host": "MCP.Example.COM"})
        loopback = await http.post("/mcp", json=rpc("ping"), headers={**headers, "host": "127.0.0.1:8000"})
        suffix = await http.post("/mcp", json=rpc("ping"), headers={**headers, "host": "mcp.example.com.evil.test"})
    assert listed.status_code == 200, listed.text
    assert upper.status_code == 200, upper.text
    assert_misdirected(loopback)
    assert_misdirected(suffix)
