"""A real `aql-mcp serve` process on 127.0.0.1, for end-to-end tests."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from aql_mcp.auth.dev_issuer import DevIssuer
from tests.support.asgi import CONFORMANCE
from tests.support.redaction import LOGS, remember_secret

STARTUP_SECONDS = 20.0


@dataclass
class ServerProcess:
    process: subprocess.Popen[bytes]
    port: int
    state: Path
    log_path: Path

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.base}/mcp"

    def token(self, subject: str = "tester", scopes: tuple[str, ...] = ("mcp",), ttl: int = 600) -> str:
        issuer = DevIssuer(state_dir=self.state, issuer=self.base, audience=self.url)
        return remember_secret(issuer.mint(subject=subject, scopes=list(scopes), ttl=ttl))

    def log_text(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def start_server(
    state: Path,
    env: Mapping[str, str] | None = None,
    plugins: tuple[str, ...] = (CONFORMANCE,),
    dev: bool = True,
    command: Sequence[str] = (sys.executable, "-m", "aql_mcp.main"),
) -> Iterator[ServerProcess]:
    """`aql-mcp serve` on a free port; `dev=False` starts production mode (give it auth settings in `env`);
    `command` is another `aql-mcp` (one installed in a virtual environment of the test's own)."""
    port = free_port()
    log_path = state / "server.log"
    LOGS.add(log_path)
    environ = {
        **os.environ,
        "AQL_MCP_STORE__PATH": str(state),
        "AQL_MCP_SERVER__PLUGINS": "[" + ",".join(f'"{p}"' for p in plugins) + "]",
        "AQL_MCP_LOGGING__LEVEL": "info",
        # Tests stop servers often; the Kubernetes drain window would add seconds to each stop.
        "AQL_MCP_SHUTDOWN__DRAIN_SECONDS": "0",
        # Plugins installed into the environment the suite runs in (a developer's own, in .venv)
        # stay out of its servers; the tests of entry points turn this back on.
        "AQL_MCP_SERVER__ENTRY_POINT_PLUGINS": "false",
        # A development server records where its key is for `dev-token` (auth/dev_key.py): in the
        # test's own directory, not the user's.
        "XDG_STATE_HOME": str(state / "xdg-state"),
        **(env or {}),
    }
    arguments = [*command, "serve", "--port", str(port), *(["--dev"] if dev else [])]
    with log_path.open("wb") as log:
        process = subprocess.Popen(arguments, env=environ, stdout=log, stderr=subprocess.STDOUT)
    server = ServerProcess(process, port, state, log_path)
    try:
        _wait_healthy(server)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_healthy(server: ServerProcess) -> None:
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{server.base}/health", timeout=1.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        try:
            # Waiting on the process itself: returns at once if it died, else after the interval.
            server.process.wait(timeout=0.05)
        except subprocess.TimeoutExpired:
            continue
        raise RuntimeError(f"server exited early:\n{server.log_text()}")
    raise RuntimeError(f"server not healthy within {STARTUP_SECONDS}s:\n{server.log_text()}")
