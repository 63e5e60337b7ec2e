import json
import os
import pty
import re
import select
import shlex
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import httpx
import pytest

from aql_mcp.auth.dev_issuer import KEY_FILE, DevIssuer
from aql_mcp.auth.jwks import SigningKey
from aql_mcp.auth.principal import Principal
from aql_mcp.auth.principal import Principal as _Principal
from aql_mcp.auth.tokens import BearerVerifier
from aql_mcp.configuration import load_settings
from aql_mcp.exceptions import InvalidToken
from aql_mcp.main import main
from aql_mcp.settings import Settings
from aql_mcp.store.sqlite.schema import MIGRATIONS as SQLITE_MIGRATIONS
from tests.support.redaction import LOGS, remember_secret
from tests.support.server import free_port, start_server
from tests.support.wait import until


def clear_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    """No AQL_MCP_ setting from the caller's shell, and no plugin installed in the environment."""
    for name in list(os.environ):
        if name.upper().startswith("AQL_MCP_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AQL_MCP_SERVER__ENTRY_POINT_PLUGINS", "false")


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private state directory in the environment the CLI reads, and no other AQL_MCP_ variable."""
    clear_environ(monkeypatch)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg-state"))
    path = tmp_path / "state"
    monkeypatch.setenv("AQL_MCP_STORE__PATH", str(path))
    make_key(path)
    return path


def make_key(state: Path) -> None:
    """The development key a dev server makes at its start (`dev-token` only reads it)."""
    DevIssuer(state_dir=state, issuer="http://127.0.0.1:8000", audience="http://127.0.0.1:8000/mcp")


def write_config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def dev_settings_for(state: Path, **server: object) -> Settings:
    return load_settings(
        None, {"AQL_MCP_STORE__PATH": str(state)}, {"server": {"dev": True, "entry_point_plugins": False, **server}}
    )


class SyncVerifier:
    """The async verifier, driven from these synchronous CLI tests."""

    def __init__(self, verifier: BearerVerifier) -> None:
        self._verifier = verifier

    def verify(self, token: str) -> _Principal:
        return anyio.run(self._verifier.verify, token)


def verifier_for(settings: Settings) -> SyncVerifier:
    issuer = DevIssuer(state_dir=settings.store.path, issuer=settings.issuer, audience=settings.audience)
    keys = {issuer.kid: SigningKey(issuer.kid, "ES256", issuer.public_key)}
    return SyncVerifier(BearerVerifier(static_keys=keys, issuer=settings.issuer, audience=settings.audience))


def minted(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["dev-token", *args]) == 0
    return capsys.readouterr().out.strip()


def test_check_config_accepts_a_good_file(state: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write_config(tmp_path, "server:\n  port: 9001\nlogging:\n  level: debug\n")
    assert main(["check-config", "--dev", "--config", str(config)]) == 0
    captured = capsys.readouterr()
    assert "9001" in captured.out
    assert captured.err == ""


def test_check_config_loads_every_plugin_and_names_what_it_registered(
    state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["check-config", "--dev"]) == 0
    out = capsys.readouterr().out
    for name in ("records", "corporate", "executions", "safety"):
        assert f"'{name}'" in out


def test_check_config_refuses_a_plugin_that_cannot_be_imported(
    state: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("AQL_MCP_SERVER__PLUGINS", '["no_such_package.plugin:plugin"]')
    assert main(["check-config", "--dev"]) == 2
    err = capsys.readouterr().err
    assert "no_such_package.plugin:plugin" in err
    assert "Traceback" not in err


def test_check_config_refuses_a_bad_file_naming_the_setting(
    state: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path, "server:\n  port: abc\n")
    assert main(["check-config", "--dev", "--config", str(config)]) == 2
    captured = capsys.readouterr()
    assert "server.port" in captured.err
    assert "AQL_MCP_SERVER__PORT" in captured.err
    assert "Traceback" not in captured.err


def test_check_config_refuses_a_bad_environment_variable(
    state: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("AQL_MCP_SERVER__PORT", "70000")
    assert main(["check-config", "--dev"]) == 2
    assert "AQL_MCP_SERVER__PORT" in capsys.readouterr().err


# One variable per kind of structured setting: lists of strings and of literals, mappings of models
# and of literals, a nested model, a mapping inside it, a list of models.
STRUCTURED_VARIABLES = [
    "AQL_MCP_HTTP__ALLOWED_ORIGINS",
    "AQL_MCP_AUTH__ALGORITHMS",
    "AQL_MCP_AUTH__OPAQUE_TOKENS",
    "AQL_MCP_AUTH__POLICY",
    "AQL_MCP_AUTH__POLICY__OPERATIONS",
    "AQL_MCP_AQL__PLUGIN_TRUST",
    "AQL_MCP_SAFETY__RISK_RULES",
]


@pytest.mark.parametrize("command", ["serve", "check-config"])
@pytest.mark.parametrize("variable", STRUCTURED_VARIABLES)
def test_the_command_refuses_undecodable_json_naming_its_variable(tmp_path: Path, command: str, variable: str) -> None:
    """STYLE rule 10: a bad setting fails at startup with the variable's name; exit status 2."""
    environ = {name: value for name, value in os.environ.items() if not name.upper().startswith("AQL_MCP_")}
    environ |= {"AQL_MCP_STORE__PATH": str(tmp_path), variable: "[http://x"}
    extra = ["--port", str(free_port())] if command == "serve" else []
    done = subprocess.run(
        [sys.executable, "-m", "aql_mcp.main", command, "--dev", *extra],
        env=environ,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    error = done.stderr.decode()
    assert variable in error
    assert "Traceback" not in error
    assert "[http://x" not in error
    assert done.stdout == b""


def test_check_config_without_dev_is_refused(state: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check-config"]) == 2
    assert "AQL_MCP_AUTH__JWKS_URL" in capsys.readouterr().err


def test_unknown_command_exits_with_usage_error(state: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["no-such-command"])
    assert caught.value.code == 2


def test_dev_token_is_accepted_by_the_verifier_of_the_same_settings(
    state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    token = minted(capsys)
    settings = dev_settings_for(state)
    principal = verifier_for(settings).verify(token)
    assert principal.subject == "developer"
    assert principal.scopes == frozenset({"mcp"})
    assert principal.claims["exp"] - principal.claims["iat"] == settings.auth.dev_token_ttl_seconds


def test_dev_token_honours_sub_scope_and_ttl(state: Path, capsys: pytest.CaptureFixture[str]) -> None:
    token = minted(capsys, "--sub", "alice", "--scope", "a b", "--ttl", "120")
    principal: Principal = verifier_for(dev_settings_for(state)).verify(token)
    assert principal.subject == "alice"
    assert principal.scopes == frozenset({"a", "b"})
    assert principal.claims["exp"] - principal.claims["iat"] == 120


def test_dev_token_reads_the_state_dir_and_ttl_from_a_config_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    clear_environ(monkeypatch)
    state = tmp_path / "from-file"
    make_key(state)
    config = write_config(tmp_path, f"store:\n  path: {state}\nauth:\n  dev_token_ttl_seconds: 300\n")
    token = minted(capsys, "--config", str(config))
    principal = verifier_for(dev_settings_for(state)).verify(token)
    assert principal.claims["exp"] - principal.claims["iat"] == 300


def test_dev_token_audience_follows_the_port(state: Path, capsys: pytest.CaptureFixture[str]) -> None:
    token = minted(capsys, "--port", "9555")
    assert verifier_for(dev_settings_for(state, port=9555)).verify(token).subject == "developer"
    with pytest.raises(InvalidToken):
        verifier_for(dev_settings_for(state)).verify(token)


def test_dev_token_key_is_the_one_the_service_uses(state: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first = minted(capsys)
    second = minted(capsys)
    verifier = verifier_for(dev_settings_for(state))
    assert verifier.verify(first).subject == verifier.verify(second).subject == "developer"


def test_dev_token_refuses_a_ttl_that_is_not_positive(state: Path, capsys: pytest.CaptureFixture[str]) -> None:
    try:
        code = main(["dev-token", "--ttl", "-60"])
    except SystemExit as exc:
        code = exc.code
    assert code == 2


def serve_command(port: int) -> list[str]:
    return [sys.executable, "-m", "aql_mcp.main", "serve", "--dev", "--port", str(port)]


def read_until(fd: int, marker: bytes, seconds: float) -> bytes:
    """What `fd` yields until `marker` and the end of its line arrive (the banner comes in one write)."""
    seen = b""
    deadline = time.monotonic() + seconds
    while marker not in seen or not seen.split(marker, 1)[1].count(b"\n"):
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
            raise AssertionError(f"{marker!r} did not arrive within {seconds}s: {seen!r}")
        try:
            seen += os.read(fd, 65536)
        except OSError:  # the terminal's other end closed: the process exited
            raise AssertionError(f"the server exited before {marker!r}: {seen!r}") from None
    return seen


# What a shell pasted into has when the virtual environment is not activated.
BARE_PATH = {"PATH": "/usr/bin:/bin"}


def run_as_printed(command: str, cwd: Path) -> str:
    """`command` as a user pastes it into a shell elsewhere, without `.venv/bin` on PATH."""
    shell = ["/bin/sh", "-c", command]
    done = subprocess.run(shell, cwd=cwd, env=BARE_PATH, capture_output=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode().strip()


def test_dev_banner_prints_a_working_token_at_a_terminal(tmp_path: Path) -> None:
    """`make run` at a terminal: the banner carries a token the service accepts, and a command for
    more that works as printed from another directory without the virtual environment on PATH."""
    port = free_port()
    environ = {
        **os.environ,
        "AQL_MCP_STORE__PATH": str(tmp_path),
        "AQL_MCP_SHUTDOWN__DRAIN_SECONDS": "0",
        "AQL_MCP_SERVER__ENTRY_POINT_PLUGINS": "false",
        "XDG_STATE_HOME": str(tmp_path / "xdg-state"),
    }
    terminal, child_side = pty.openpty()
    log_path = tmp_path / "server.log"
    LOGS.add(log_path)
    with log_path.open("wb") as log:
        process = subprocess.Popen(serve_command(port), env=environ, stdout=log, stderr=child_side)
    os.close(child_side)
    try:
        banner = read_until(terminal, b"sign-in code: ", 20.0).decode().replace("\r\n", "\n")
        token = remember_secret(banner.split("export MCP_TOKEN=", 1)[1].split()[0])
        code = remember_secret(banner.split("sign-in code: ", 1)[1].split(")")[0])
        assert code == (tmp_path / "console-login-code").read_text().strip()
        answer = post_initialize(process, f"http://127.0.0.1:{port}/mcp", token, seconds=20.0)
        assert answer.status_code == 200
        assert "mcp-session-id" in answer.headers
        more = banner.split("More tokens (--sub, --scope, --ttl):\n\n  ", 1)[1].split("\n", 1)[0]
        another = remember_secret(run_as_printed(more, cwd=Path("/")))
        assert post_initialize(process, f"http://127.0.0.1:{port}/mcp", another, seconds=20.0).status_code == 200
    finally:
        process.terminate()
        process.wait(timeout=10)
        os.close(terminal)


def test_dev_banner_without_a_terminal_prints_no_token_but_a_command_that_works_as_printed(tmp_path: Path) -> None:
    """stderr into a file or a log collector must not keep a live credential; the command it
    prints instead runs from any directory without `.venv/bin` on PATH."""
    state = tmp_path / "state"
    elsewhere = tmp_path / "elsewhere"
    state.mkdir()
    elsewhere.mkdir()
    with start_server(state) as server:
        log = server.log_text()
        command = log.split("export MCP_TOKEN=$(", 1)[1].split(")\n", 1)[0]
        token = remember_secret(run_as_printed(command, cwd=elsewhere))
        answer = post_initialize(server.process, server.url, token, seconds=20.0)
        assert answer.status_code == 200
        cat = log.split("sign-in code: run `", 1)[1].split("`", 1)[0]
        assert run_as_printed(cat, cwd=elsewhere) == (state / "console-login-code").read_text().strip()
        example = log.split("Example call", 1)[1].split(":\n\n", 1)[1].split("\n\n", 1)[0]
        answer_text = run_as_printed(f"MCP_TOKEN={shlex.quote(token)}; {example}", cwd=elsewhere)
        envelope = json.loads(json.loads(answer_text)["result"]["content"][0]["text"])
        assert envelope["success"] is True  # the banner's call works as printed
    assert "DEVELOPMENT mode" in log
    assert f"Operator console: {server.base}/console" in log
    assert (state / "console-login-code").read_text().strip() not in log
    assert not re.search(r"eyJ[\w-]+\.[\w-]+\.[\w-]+", log)  # no JWT anywhere
    assert list(elsewhere.iterdir()) == []  # nothing made where the command ran


def cli_environ(xdg: Path) -> dict[str, str]:
    """This environment without any AQL_MCP_ setting, with its own user state directory."""
    environ = {name: value for name, value in os.environ.items() if not name.upper().startswith("AQL_MCP_")}
    return environ | {
        "XDG_STATE_HOME": str(xdg),
        "AQL_MCP_SHUTDOWN__DRAIN_SECONDS": "0",
        "AQL_MCP_SERVER__ENTRY_POINT_PLUGINS": "false",
    }


@contextmanager
def dev_server_in(project: Path, xdg: Path) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """`aql-mcp serve --dev` started from `project` with the default (relative) state directory, as `make run`."""
    port = free_port()
    log_path = project / "server.log"
    LOGS.add(log_path)
    with log_path.open("wb") as log:
        process = subprocess.Popen(serve_command(port), cwd=project, env=cli_environ(xdg), stdout=log, stderr=log)
    try:
        until(lambda: is_healthy(port) or process.poll() is not None, "the development server did not start")
        assert process.poll() is None, log_path.read_text()
        yield process, port
    finally:
        process.terminate()
        process.wait(timeout=10)


def is_healthy(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/health", timeout=1.0).status_code == 200
    except httpx.TransportError:
        return False


def dev_token_in(directory: Path, xdg: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    command = [sys.executable, "-m", "aql_mcp", "dev-token", *args]
    return subprocess.run(command, cwd=directory, env=cli_environ(xdg), capture_output=True, timeout=60, check=False)


def test_dev_token_run_from_another_directory_finds_the_running_dev_servers_key(tmp_path: Path) -> None:
    project, elsewhere, xdg = tmp_path / "project", tmp_path / "elsewhere", tmp_path / "xdg-state"
    project.mkdir()
    elsewhere.mkdir()
    with dev_server_in(project, xdg) as (process, port):
        minted = dev_token_in(elsewhere, xdg, "--port", str(port))

        assert minted.returncode == 0, minted.stderr.decode()
        token = remember_secret(minted.stdout.decode().strip())
        assert post_initialize(process, f"http://127.0.0.1:{port}/mcp", token, seconds=20.0).status_code == 200
        assert (project / "state" / KEY_FILE).is_file()
        assert list(elsewhere.iterdir()) == []  # no second key made where it ran
    # The record goes with the server that left it.
    assert not (xdg / "aql-mcp" / f"dev-server-{port}.json").exists()


def test_a_second_dev_server_refused_the_port_leaves_the_running_servers_record(tmp_path: Path) -> None:
    project, second, xdg = tmp_path / "project", tmp_path / "second", tmp_path / "xdg-state"
    project.mkdir()
    second.mkdir()
    with dev_server_in(project, xdg) as (process, port):
        record = xdg / "aql-mcp" / f"dev-server-{port}.json"
        until(record.is_file, "the running server wrote no record")
        refused = subprocess.run(
            serve_command(port), cwd=second, env=cli_environ(xdg), capture_output=True, timeout=60, check=False
        )

        assert refused.returncode != 0
        assert json.loads(record.read_text(encoding="utf-8"))["pid"] == process.pid
        minted = dev_token_in(tmp_path, xdg, "--port", str(port))
        assert minted.returncode == 0, minted.stderr.decode()
        remember_secret(minted.stdout.decode().strip())


def test_dev_token_that_finds_no_key_says_where_it_looked_and_makes_none(tmp_path: Path) -> None:
    elsewhere, xdg = tmp_path / "elsewhere", tmp_path / "xdg-state"
    elsewhere.mkdir()

    refused = dev_token_in(elsewhere, xdg, "--port", "8123")

    assert refused.returncode == 1
    assert refused.stdout == b""
    error = refused.stderr.decode()
    assert str(elsewhere / "state" / KEY_FILE) in error
    assert str(xdg / "aql-mcp" / "dev-server-8123.json") in error
    assert "--state" in error
    assert "AQL_MCP_STORE__PATH" in error
    assert "Traceback" not in error
    assert list(elsewhere.iterdir()) == []


def test_dev_token_pointed_at_a_directory_without_a_key_names_it(tmp_path: Path) -> None:
    empty = tmp_path / "empty"

    refused = dev_token_in(tmp_path, tmp_path / "xdg-state", "--state", str(empty))

    assert refused.returncode == 1
    assert str(empty / KEY_FILE) in refused.stderr.decode()
    assert not empty.exists()


def post_initialize(process: subprocess.Popen[bytes], url: str, token: str, *, seconds: float) -> httpx.Response:
    """initialize, retried while the service is still starting."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    headers = {"authorization": f"Bearer {token}", "accept": "application/json, text/event-stream"}
    deadline = time.monotonic() + seconds
    while True:
        try:
            return httpx.post(url, json=body, headers=headers, timeout=2.0)
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise
        try:
            # Waiting on the process itself: returns at once if it died, else after the interval.
            process.wait(timeout=0.05)
        except subprocess.TimeoutExpired:
            continue
        raise AssertionError("the server exited while starting")


def test_serve_refuses_to_start_on_a_store_a_newer_release_migrated(tmp_path: Path) -> None:
    """A rollback of the image over a breaking migration: the process exits 2 as for any refused
    configuration, logs `schema_too_new` with the versions, and prints no traceback (docs/operations.md)."""
    with start_server(tmp_path):
        pass
    with sqlite3.connect(tmp_path / "aql-mcp.sqlite3") as db:
        db.execute("INSERT INTO schema_version (version, compatible_from) VALUES (1000, 1000)")
    command = [sys.executable, "-m", "aql_mcp.main", "serve", "--dev", "--port", str(free_port())]
    environ = {
        **os.environ,
        "AQL_MCP_STORE__PATH": str(tmp_path),
        "AQL_MCP_LOGGING__FORMAT": "json",
        "AQL_MCP_SERVER__ENTRY_POINT_PLUGINS": "false",
    }
    done = subprocess.run(command, env=environ, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    refused = [e for e in events if e.get("event") == "schema_too_new"]
    assert [(e["found"], e["needs"], e["known"]) for e in refused] == [(1000, 1000, len(SQLITE_MIGRATIONS))]
    assert "Traceback" not in done.stdout + done.stderr
    assert "configuration refused" in done.stderr


def test_serve_starts_on_a_store_a_newer_release_migrated_additively(tmp_path: Path) -> None:
    """A rollback over additive migrations only: the older release serves (docs/operations.md)."""
    with start_server(tmp_path):
        pass
    with sqlite3.connect(tmp_path / "aql-mcp.sqlite3") as db:
        needs = db.execute("SELECT compatible_from FROM schema_version ORDER BY version DESC").fetchone()[0]
        db.execute("INSERT INTO schema_version (version, compatible_from) VALUES (1000, ?)", (needs,))
    with start_server(tmp_path) as server:
        assert httpx.get(f"{server.base}/health", timeout=5).status_code == 200


# --- check-config as CI runs it: the real command, its exit code and message (issue 15) ----------

TUNED = "tests.support.tuned:plugin"
ROOT = Path(__file__).resolve().parents[1]


def run_cli(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`aql-mcp ARGS` in a process of its own, with only the AQL_MCP_ variables given here (and no
    plugin installed in the environment, unless `env` turns entry points back on)."""
    clean = {k: v for k, v in os.environ.items() if not k.upper().startswith("AQL_MCP_")}
    environ = {
        **clean,
        "AQL_MCP_STORE__PATH": str(tmp_path / "state"),
        "AQL_MCP_SERVER__ENTRY_POINT_PLUGINS": "false",
        "PYTHONPATH": str(ROOT),
        **(env or {}),
    }
    command = [str(Path(sys.executable).parent / "aql-mcp"), *args]
    return subprocess.run(command, capture_output=True, text=True, env=environ, timeout=60, check=False)


def refused(result: subprocess.CompletedProcess[str], *names: str) -> None:
    assert result.returncode == 2, result.stdout + result.stderr
    for name in names:
        assert name in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert "configuration ok" not in result.stdout


def test_check_config_lists_each_plugin_with_where_it_came_from(tmp_path: Path) -> None:
    env = {"AQL_MCP_SERVER__PLUGINS": f'["{TUNED}"]', "AQL_MCP_PLUGINS__TUNED__LEVEL": "3"}
    result = run_cli(tmp_path, "check-config", "--dev", env=env)
    assert result.returncode == 0, result.stderr
    assert f"plugin tuned: {TUNED} (server.plugins)" in result.stdout
    assert "plugin records: aql_mcp.plugins.records:plugin (server.builtin_plugins)" in result.stdout


@pytest.mark.parametrize(
    ("variable", "value", "names"),
    [
        ("AQL_MCP_PLUGINS__TUNED__LEVEL", "9", ("plugins.tuned.level", "AQL_MCP_PLUGINS__TUNED__LEVEL")),
        ("AQL_MCP_PLUGINS__TUNED__LEVLE", "2", ("plugins.tuned.levle", "AQL_MCP_PLUGINS__TUNED__LEVLE")),
        ("AQL_MCP_PLUGINS__TUNDE__LEVEL", "2", ("plugins.tunde", "AQL_MCP_PLUGINS__TUNDE")),
        ("AQL_MCP_PLUGINS__RECORDS__LEVEL", "2", ("plugins.records", "AQL_MCP_PLUGINS__RECORDS")),
    ],
)
def test_check_config_refuses_a_wrong_plugin_setting_naming_it(
    tmp_path: Path, variable: str, value: str, names: tuple[str, ...]
) -> None:
    """A value the plugin's model rejects, an unknown key, a section for a plugin that is not
    loaded, and one for a plugin that takes no settings."""
    env = {"AQL_MCP_SERVER__PLUGINS": f'["{TUNED}"]', variable: value}
    refused(run_cli(tmp_path, "check-config", "--dev", env=env), *names)


def test_check_config_refuses_a_plugin_setting_from_the_config_file(tmp_path: Path) -> None:
    config = write_config(tmp_path, f"server:\n  plugins: ['{TUNED}']\nplugins:\n  tuned:\n    level: 0\n")
    refused(run_cli(tmp_path, "check-config", "--dev", "--config", str(config)), "plugins.tuned.level")


def test_serve_refuses_a_wrong_plugin_setting_before_it_listens(tmp_path: Path) -> None:
    env = {"AQL_MCP_SERVER__PLUGINS": f'["{TUNED}"]', "AQL_MCP_PLUGINS__TUNED__LEVEL": "9"}
    result = run_cli(tmp_path, "serve", "--dev", "--port", str(free_port()), env=env)
    refused(result, "plugins.tuned.level", "AQL_MCP_PLUGINS__TUNED__LEVEL")


def test_check_config_refuses_a_plugin_trusted_above_the_cap_saying_what_it_would_run_at(tmp_path: Path) -> None:
    """`serve` lowers such a plugin with a warning; the CI gate fails instead (MCP-AQL adapter trust)."""
    env = {"AQL_MCP_SERVER__PLUGINS": '["tests.support.self_certified:plugin"]'}
    result = run_cli(tmp_path, "check-config", "--dev", env=env)
    refused(result, "self-certified", "'certified'", "'community_reviewed'", "aql.plugin_trust.self-certified")


@pytest.mark.parametrize("trust", ["certified", "validated"])
def test_check_config_accepts_an_explicit_trust_for_the_plugin_even_above_the_cap(tmp_path: Path, trust: str) -> None:
    env = {
        "AQL_MCP_SERVER__PLUGINS": '["tests.support.self_certified:plugin"]',
        "AQL_MCP_AQL__PLUGIN_TRUST": f'{{"self-certified": "{trust}"}}',
    }
    result = run_cli(tmp_path, "check-config", "--dev", env=env)
    assert result.returncode == 0, result.stderr
    assert "self-certified" in result.stdout


def test_check_config_accepts_a_plugin_within_a_raised_cap(tmp_path: Path) -> None:
    env = {"AQL_MCP_SERVER__PLUGINS": '["tests.support.self_certified:plugin"]', "AQL_MCP_AQL__MAX_TRUST": "certified"}
    assert run_cli(tmp_path, "check-config", "--dev", env=env).returncode == 0


def test_check_config_refuses_disabling_a_plugin_no_package_offers(tmp_path: Path) -> None:
    env = {"AQL_MCP_SERVER__DISABLED_PLUGINS": '["no-such-plugin"]', "AQL_MCP_SERVER__ENTRY_POINT_PLUGINS": "true"}
    refused(run_cli(tmp_path, "check-config", "--dev", env=env), "server.disabled_plugins", "no-such-plugin")


LEAKED = "s3cr3t-plugin-token"
LEAKY = {"leaky": "tests.support.leaky:plugin", "leaky_ops": "tests.support.leaky:operations_plugin"}


@pytest.mark.parametrize("command", ["check-config", "serve"])
@pytest.mark.parametrize(
    ("name", "step"), [("leaky", "configure"), ("leaky", "register"), ("leaky_ops", "register_operations")]
)
def test_a_plugin_failing_in_its_own_code_exits_2_naming_the_step_without_its_message(
    tmp_path: Path, command: str, name: str, step: str
) -> None:
    """The exception's message could quote a secret setting: only the step and the type are shown."""
    prefix = f"AQL_MCP_PLUGINS__{name.upper()}__"
    env = {"AQL_MCP_SERVER__PLUGINS": f'["{LEAKY[name]}"]', prefix + "TOKEN": LEAKED, prefix + "FAIL_IN": step}
    extra = ["--port", str(free_port())] if command == "serve" else []
    result = run_cli(tmp_path, command, "--dev", *extra, env=env)
    refused(result, f"plugin {name}: {step} failed (RuntimeError)")
    assert LEAKED not in result.stdout + result.stderr


def test_a_plugins_secret_setting_is_never_printed(tmp_path: Path) -> None:
    env = {"AQL_MCP_SERVER__PLUGINS": f'["{LEAKY["leaky"]}"]', "AQL_MCP_PLUGINS__LEAKY__TOKEN": LEAKED}
    checked = run_cli(tmp_path, "check-config", "--dev", env=env)
    assert checked.returncode == 0, checked.stderr
    assert LEAKED not in checked.stdout + checked.stderr
    with start_server(tmp_path, env={**env, "AQL_MCP_LOGGING__LEVEL": "debug"}, plugins=(LEAKY["leaky"],)) as server:
        assert "leaky" in server.log_text()
    assert LEAKED not in server.log_text()


def test_serve_refuses_a_probes_port_already_taken_before_it_listens(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        env = {"AQL_MCP_PROBES__PORT": str(taken.getsockname()[1])}
        result = run_cli(tmp_path, "serve", "--dev", "--port", str(free_port()), env=env)
    refused(result, "probes.port", "AQL_MCP_PROBES__PORT")
