"""Shared fixtures: the anyio backend, settings for a throwaway state directory, clients."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from aql_mcp.auth.dev_issuer import DevIssuer
from aql_mcp.observability.logging import configure_logging
from aql_mcp.settings import Settings
from aql_mcp.store.base import Store
from tests.support.asgi import asgi_client, dev_settings
from tests.support.engines import ENGINES, Backend, backend_for
from tests.support.postgres import create_database, drop_database, start_postgres, stop_postgres
from tests.support.redaction import leaks
from tests.support.server import ServerProcess, start_server


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session", autouse=True)
def service_logging() -> None:
    """In-process tests log as the service does (JSON lines, info), whichever test a worker ran first:
    the service's loggers keep the configuration of their first use (cache_logger_on_first_use), and
    pytest-xdist hands each worker the test files in no fixed order."""
    configure_logging(level="info", console=False)


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


@pytest.fixture(scope="session")
def postgres_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A throwaway PostgreSQL for the whole run (scripts/postgres.sh); each test takes a database of its own."""
    directory = tmp_path_factory.mktemp("postgres")
    url = start_postgres(directory)
    yield url
    stop_postgres(directory)


@pytest.fixture(scope="module")
def database(postgres_server: str) -> Iterator[str]:
    """An empty PostgreSQL database for one test module (its servers share it)."""
    name = "module_" + secrets.token_hex(4)
    url = asyncio.run(create_database(postgres_server, name))
    yield url
    asyncio.run(drop_database(postgres_server, name))


@pytest.fixture
def lone_database(postgres_server: str) -> Iterator[str]:
    """An empty PostgreSQL database for one test, for servers that must not share the module's: a
    replica of the module's other servers would take over the work this test's replicas leave."""
    name = "lone_" + secrets.token_hex(4)
    url = asyncio.run(create_database(postgres_server, name))
    yield url
    asyncio.run(drop_database(postgres_server, name))


@pytest.fixture(params=ENGINES)
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    """An empty database of each engine in turn: tests taking it form the engine contract suite."""
    server = request.getfixturevalue("postgres_server") if request.param == "postgres" else None
    async for opened in backend_for(request.param, tmp_path, server):
        yield opened


@pytest.fixture
async def store(backend: Backend) -> Store:
    return await backend.open()


WORKER_LEAKS: list[str] = []
# `make check` runs only what stays in this process: a test is `slow` when its module uses something
# of these modules (they start servers, PostgreSQL, helm or a flood) or `subprocess` itself, when it
# takes one of these fixtures, or when it is a test's PostgreSQL variant.
PROCESS_MODULES = {
    "subprocess",
    "tests.support.server",
    "tests.support.replicas",
    "tests.support.postgres",
    "tests.support.chart",
    "tests.support.flood",
    "tests.support.filesystem",
    "tests.support.nginx",
    "tests.support.oidc",
}
PROCESS_FIXTURES = {"server", "postgres_server", "database", "deploy_tools"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _starts_processes(item):
            item.add_marker(pytest.mark.slow)


def _starts_processes(item: pytest.Item) -> bool:
    module = getattr(item, "module", None)
    used = vars(module).values() if module is not None else ()
    if any(getattr(value, "__module__", getattr(value, "__name__", None)) in PROCESS_MODULES for value in used):
        return True
    if PROCESS_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    callspec = getattr(item, "callspec", None)
    return callspec is not None and any(value == "postgres" for value in callspec.params.values())


def pytest_testnodedown(node: object, error: object) -> None:
    """pytest-xdist, on the controller: what a worker's servers leaked (its own session's finding)."""
    WORKER_LEAKS.extend(getattr(node, "workeroutput", {}).get("leaks", []))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run if any secret it used reached any server log line (corporate §15.2). Under
    pytest-xdist each worker checks the servers it started and hands its finding to the controller,
    which fails the run: a worker's own exit status does not reach `make test`."""
    found = leaks()
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["leaks"] = found
        return
    found += WORKER_LEAKS
    if found:
        print("\nSECRETS FOUND IN SERVER LOGS:\n  " + "\n  ".join(found))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
