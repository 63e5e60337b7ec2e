"""Which console routes exist in which mode (docs/console.md), in-process."""

from __future__ import annotations

from pathlib import Path

import pytest

from aql_mcp.auth.opaque import digest
from aql_mcp.settings import Settings
from tests.support.asgi import asgi_client, dev_settings

OPERATOR_TOKEN = "opaque-operator-token-0123456789abcdef"


def production(state: Path) -> Settings:
    return Settings(
        server={"dev": False},
        store={"path": state},
        logging={"level": "warning"},
        auth={"opaque_tokens": {digest(OPERATOR_TOKEN): {"sub": "olivia", "scopes": ["aql:operator"]}}},
    )


@pytest.mark.anyio
async def test_outside_development_mode_there_is_no_login_and_the_cookie_is_not_a_credential(tmp_path: Path) -> None:
    async with asgi_client(production(tmp_path)) as http:
        assert (await http.get("/console/login")).status_code == 404
        assert (await http.post("/console/login", data={"operator": "x"})).status_code == 404
        cookie_only = await http.get("/console", headers={"cookie": f"aql_console={OPERATOR_TOKEN}"})
        assert cookie_only.status_code == 401
        with_bearer = await http.get("/console", headers={"authorization": f"Bearer {OPERATOR_TOKEN}"})
    assert with_bearer.status_code == 200
    assert "Sign out" not in with_bearer.text  # a gateway's operator has no console session to end
    assert "olivia" in with_bearer.text


@pytest.mark.anyio
async def test_a_browser_outside_development_mode_gets_401_not_a_login_redirect(tmp_path: Path) -> None:
    async with asgi_client(production(tmp_path)) as http:
        response = await http.get("/console", headers={"accept": "text/html"})
    assert response.status_code == 401
    assert response.headers["content-type"].startswith("text/html")
    assert response.headers["www-authenticate"].startswith("Bearer realm=")


@pytest.mark.anyio
async def test_a_disabled_console_is_404(tmp_path: Path) -> None:
    async with asgi_client(dev_settings(tmp_path, console={"enabled": False})) as http:
        for path in ("/console", "/console/events", "/console/login"):
            assert (await http.get(path)).status_code == 404
