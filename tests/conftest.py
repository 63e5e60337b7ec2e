"""Shared fixtures: the anyio backend, settings for a throwaway state directory, clients."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from aql_mcp.auth.dev_issuer import DevIssuer
from aql_mcp.settings import Settings
from tests.support.asgi import asgi_client, dev_settings
from tests.support.redaction import leaks
from tests.support.server import ServerProcess, start_server


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return dev_settings(tmp_path)


@pytest.fixture
def token(settings: Settings) -> str:
    issuer = DevIssuer(state_dir=settings.store.path, issuer=settings.issuer, audience=settings.audience)
    return issuer.mint(subject="tester", scopes=["mcp"], ttl=600)


@pytest.fixture
async def client(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(settings) as http:
        yield http


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A real `aql-mcp serve --dev` process with the conformance fixtures, one per test module."""
    with start_server(tmp_path_factory.mktemp("server")) as process:
        yield process


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run if any secret it used reached any server log line (corporate §15.2)."""
    found = leaks()
    if found:
        print("\nSECRETS FOUND IN SERVER LOGS:\n  " + "\n  ".join(found))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
