"""The hooks a plugin may offer the app beyond tools and operations (plugin_host/contracts.py):
HTTP routes mounted behind the global middleware, and lines for the development banner. The core
edge finds them on the loaded plugins and names no plugin itself."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from aql_mcp.app import create_app
from aql_mcp.plugin import BannerPlugin, RouteServices, RoutesPlugin, Settings
from aql_mcp.plugins.safety.operations import plugin as safety
from aql_mcp.protocol.primitives import Registry
from tests.support.asgi import BASE, dev_settings


@dataclass
class HelloPlugin:
    """Serves `/hello`, and remembers what the app handed it."""

    name: str = "hello"
    given: list[RouteServices] = field(default_factory=list)

    def register(self, registry: Registry) -> None:
        return None

    def routes(self, settings: Settings, services: RouteServices) -> list[BaseRoute]:
        self.given.append(services)

        async def hello(request: Request) -> Response:
            return PlainTextResponse(f"hello from {settings.server.name}")

        return [Route("/hello", hello, methods=["GET"])]


@asynccontextmanager
async def client(settings: Settings, plugin: HelloPlugin) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings, plugins=[plugin])
    transport = httpx.ASGITransport(app=app)
    async with app.router.lifespan_context(app), httpx.AsyncClient(transport=transport, base_url=BASE) as http:
        yield http


@pytest.mark.anyio
async def test_a_plugins_routes_are_served_behind_the_global_middleware(tmp_path: Path) -> None:
    plugin = HelloPlugin()
    assert isinstance(plugin, RoutesPlugin)
    async with client(dev_settings(tmp_path), plugin) as http:
        answered = await http.get("/hello")
        refused = await http.get("/hello", headers={"origin": "https://evil.example"})
    assert answered.text == "hello from aql-mcp"
    assert answered.headers["x-request-id"]  # the request id middleware ran
    assert refused.status_code == 403  # and the Origin check
    (services,) = plugin.given
    assert services.dev_issuer is not None  # development mode: the login's issuer is handed over


@pytest.mark.anyio
async def test_the_console_is_the_safety_plugins_without_it_there_is_none(tmp_path: Path) -> None:
    without = dev_settings(tmp_path, server={"builtin_plugins": ["aql_mcp.plugins.records:plugin"]})
    async with client(without, HelloPlugin()) as http:
        assert (await http.get("/console")).status_code == 404
    async with client(dev_settings(tmp_path / "with"), HelloPlugin()) as http:
        assert (await http.get("/console")).status_code == 401


def test_the_safety_plugin_offers_the_console_line_of_the_banner(tmp_path: Path) -> None:
    settings = dev_settings(tmp_path)
    assert isinstance(safety, BannerPlugin)
    line = safety.banner(settings, terminal=False)
    assert line.startswith(
        f"\nOperator console: {settings.base_url}/console (development login; sign-in code: run `cat "
    )
    assert safety.banner(dev_settings(tmp_path, console={"enabled": False}), terminal=True) == ""


def test_the_app_and_the_cli_import_neither_the_console_nor_the_legacy_tasks_mapping() -> None:
    probe = (
        "import sys, aql_mcp.app, aql_mcp.main; "
        "print(sorted(m for m in sys.modules if m.startswith(('aql_mcp.plugins.safety.console', "
        "'aql_mcp.plugins.executions.legacy_tasks', 'aql_mcp.plugins.safety.operations'))))"
    )
    found = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert found.stdout.strip() == "[]"
