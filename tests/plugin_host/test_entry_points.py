"""A plugin package installed into an environment is served, with no setting naming it (issue 15),
and one with a table of its own gets that table on either engine (issue 21).

A fresh virtual environment gets aql-mcp and the example packages `examples/greeter-plugin` and
`examples/notes-plugin` as pip
installs them, without the network: the project's own environment lends its dependencies and the
build backend through a `.pth` file, and both packages are installed from copies of their sources
with `--no-deps --no-build-isolation --no-index`. Then that environment's `aql-mcp` finds the
plugin through its entry point (`aql_mcp.plugins`) and serves it over HTTP on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sqlite3
import subprocess
import sys
import sysconfig
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import pytest

from aql_mcp.store.factory import SQLITE_FILE
from tests.support.aql import session
from tests.support.distribution import fake_distribution
from tests.support.server import ServerProcess, start_server

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "greeter-plugin"
NOTES = ROOT / "examples" / "notes-plugin"
# Installing builds both packages: slower than most tests, well inside this bound.
INSTALL_SECONDS = 180
pytestmark = pytest.mark.timeout(300)


@dataclass
class Environment:
    venv: Path
    example: Path
    notes: Path

    @property
    def aql_mcp(self) -> Path:
        return self.venv / "bin" / "aql-mcp"

    def run(self, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        # From the example's copy: nothing of the checkout is on the path.
        command = [str(a) for a in args]
        environ = clean_environ(env)
        return subprocess.run(
            command, capture_output=True, text=True, env=environ, cwd=self.example, timeout=INSTALL_SECONDS
        )


def clean_environ(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The test's environment without settings or a PYTHONPATH that would reach the checkout, with
    entry points on (the suite's other servers leave installed plugins out: tests/support/server.py)."""
    keep = {k: v for k, v in os.environ.items() if not k.upper().startswith("AQL_MCP_") and k != "PYTHONPATH"}
    return {**keep, "AQL_MCP_SERVER__ENTRY_POINT_PLUGINS": "true", **(extra or {})}


def copy_sources(source: Path, target: Path, *names: str) -> Path:
    """A copy to build from: pip builds in the source tree, which must stay clean."""
    target.mkdir(parents=True)
    ignore = shutil.ignore_patterns("build", "*.egg-info", "__pycache__", ".pytest_cache")
    for name in names:
        path = source / name
        if path.is_dir():
            shutil.copytree(path, target / name, ignore=ignore)
        else:
            shutil.copy2(path, target / name)
    return target


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Environment:
    base = tmp_path_factory.mktemp("entry-points")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=INSTALL_SECONDS)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout.strip()  # fmt: skip
    # After the environment's own packages: the project's dependencies, pip and setuptools.
    lender = sysconfig.get_paths()["purelib"]
    (Path(purelib) / "lender.pth").write_text(f"import site; site.addsitedir({lender!r})\n", encoding="utf-8")
    service = copy_sources(ROOT, base / "aql-mcp", "pyproject.toml", "README.md", "src")
    example = copy_sources(EXAMPLE, base / "greeter-plugin", "pyproject.toml", "src", "tests")
    notes = copy_sources(NOTES, base / "notes-plugin", "pyproject.toml", "src", "tests")
    install = [str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--no-index"]
    result = subprocess.run(
        [*install, str(service), str(example), str(notes)],
        capture_output=True, text=True, env=clean_environ(), timeout=INSTALL_SECONDS,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    return Environment(venv, example, notes)


def test_check_config_lists_the_installed_plugin_and_its_package(installed: Environment, tmp_path: Path) -> None:
    result = installed.run(installed.aql_mcp, "check-config", "--dev", env={"AQL_MCP_STORE__PATH": str(tmp_path)})
    assert result.returncode == 0, result.stderr
    assert "plugin greeter: greeter_plugin:plugin (entry point greeter of greeter-plugin 0.1.0)" in result.stdout


def test_a_disabled_installed_plugin_is_not_loaded(installed: Environment, tmp_path: Path) -> None:
    env = {"AQL_MCP_STORE__PATH": str(tmp_path), "AQL_MCP_SERVER__DISABLED_PLUGINS": '["greeter"]'}
    result = installed.run(installed.aql_mcp, "check-config", "--dev", env=env)
    assert result.returncode == 0, result.stderr
    assert "greeter" not in result.stdout


def test_check_config_refuses_a_wrong_setting_of_the_installed_plugin(installed: Environment, tmp_path: Path) -> None:
    env = {"AQL_MCP_STORE__PATH": str(tmp_path), "AQL_MCP_PLUGINS__GREETER__GREETING": ""}
    result = installed.run(installed.aql_mcp, "check-config", "--dev", env=env)
    assert result.returncode == 2
    assert "plugins.greeter.greeting" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("env", "word"), [({}, "Hello"), ({"AQL_MCP_PLUGINS__GREETER__GREETING": "Bonjour"}, "Bonjour")]
)
def test_the_installed_plugin_is_served_through_its_entry_point(
    installed: Environment, tmp_path: Path, env: dict[str, str], word: str
) -> None:
    """Its plain tool and its MCP-AQL operation answer over HTTP, with the greeting its setting gives."""
    with start_server(tmp_path, env=clean_environ(env), plugins=(), command=(str(installed.aql_mcp),)) as server:
        assert "entry point greeter of greeter-plugin 0.1.0" in server.log_text()
        with session(server) as agent:
            result = agent.tool("greeting", {"name": "Ada"})
            assert result.get("isError", False) is False
            assert result["content"][0]["text"] == f"{word}, Ada!"
            envelope = agent.call("mcp_aql_read", "greet", name="Ada")
            assert envelope["success"] is True
            assert envelope["data"] == {"greeting": f"{word}, Ada!"}


def test_the_example_packages_own_tests_pass_against_the_installed_package(installed: Environment) -> None:
    for example in (installed.example, installed.notes):
        result = installed.run(
            installed.venv / "bin" / "python", "-m", "pytest", "-q", "-p", "no:cacheprovider", example / "tests"
        )
        assert result.returncode == 0, result.stdout + result.stderr


def add_note(server: ServerProcess, text: str) -> str:
    with session(server) as agent:
        envelope = agent.call("mcp_aql_create", "add_note", text=text)
    assert envelope["success"] is True, envelope
    return str(envelope["data"]["id"])


def listed_notes(server: ServerProcess) -> list[str]:
    with session(server) as agent:
        envelope = agent.call("mcp_aql_read", "list_notes")
    assert envelope["success"] is True, envelope
    return [note["text"] for note in envelope["data"]["notes"]]


def serve_notes(installed: Environment, state: Path, env: dict[str, str]) -> AbstractContextManager[ServerProcess]:
    state.mkdir(parents=True, exist_ok=True)
    return start_server(state, env=clean_environ(env), plugins=(), command=(str(installed.aql_mcp),))


def test_the_installed_plugin_with_a_table_keeps_its_rows_across_a_restart_on_sqlite(
    installed: Environment, tmp_path: Path
) -> None:
    """The service creates the plugin's table when its store opens and records the plugin's own
    schema version beside the core's; a restart finds both and migrates nothing again."""
    with serve_notes(installed, tmp_path, {}) as server:
        assert "entry point notes of notes-plugin 0.1.0" in server.log_text()
        add_note(server, "kept on SQLite")
    with serve_notes(installed, tmp_path, {}) as server:
        assert listed_notes(server) == ["kept on SQLite"]
    db = sqlite3.connect(tmp_path / SQLITE_FILE)
    try:
        versions = db.execute("SELECT version FROM plugin_schema WHERE plugin = 'notes'").fetchall()
    finally:
        db.close()
    assert versions == [(1,)]


def test_the_installed_plugin_with_a_table_keeps_its_rows_across_a_restart_on_postgres(
    installed: Environment, tmp_path: Path, database: str
) -> None:
    env = {"AQL_MCP_STORE__URL": database}
    with serve_notes(installed, tmp_path / "first", env) as server:
        add_note(server, "kept on PostgreSQL")
    with serve_notes(installed, tmp_path / "second", env) as server:
        assert listed_notes(server) == ["kept on PostgreSQL"]
    versions = asyncio.run(fetch(database, "SELECT version FROM plugin_schema WHERE plugin = 'notes'"))
    assert versions == [1]


async def fetch(url: str, query: str) -> list[object]:
    connection = await asyncpg.connect(url)
    try:
        return [row[0] for row in await connection.fetch(query)]
    finally:
        await connection.close()


def test_a_plugin_installed_where_the_suite_runs_stays_out_of_the_servers_it_starts(tmp_path: Path) -> None:
    """A developer's own plugin installed into .venv must not load into (or break) every test server."""
    site = fake_distribution(tmp_path / "site", "broken-plugin", {"broken": "tests.support.broken_plugin:plugin"})
    path = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
    with start_server(tmp_path, env={"PYTHONPATH": path}) as server:
        assert "entry point broken" not in server.log_text()
