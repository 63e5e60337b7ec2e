"""A real `aql-mcp serve` process on 127.0.0.1, for end-to-end tests."""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from aql_mcp.auth.dev_issuer import DevIssuer
from tests.support.asgi import CONFORMANCE
from tests.support.redaction import LOGS, remember_secret

STARTUP_SECONDS = 20.0
# A server whose port another process took between `free_port` and its bind is started again on another.
START_ATTEMPTS = 3
IN_USE = b"address already in use"


@dataclass
class ServerProcess:
    process: subprocess.Popen[bytes]
    port: int
    state: Path
    log_path: Path
    # How it was started, for `start_again`; kept out of repr (the environment may carry a secret).
    arguments: list[str] = field(default_factory=list, repr=False)
    environ: dict[str, str] = field(default_factory=dict, repr=False)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.base}/mcp"

    def token(self, subject: str = "tester", scopes: tuple[str, ...] = ("mcp",), ttl: int = 600) -> str:
        issuer = DevIssuer(state_dir=self.state, issuer=self.base, audience=self.url)
        return remember_secret(issuer.mint(subject=subject, scopes=list(scopes), ttl=ttl))

    def start_again(self) -> None:
        """A new process on the same port with the same settings, once the last one has exited (a
        restarted pod); it appends to the same log."""
        assert self.process.poll() is not None, "the last process still runs"
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(self.arguments, env=self.environ, stdout=log, stderr=subprocess.STDOUT)
        _wait_healthy(self)

    def log_text(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")


def free_port() -> int:
    """A port to listen on, below the kernel's ephemeral range (net.ipv4.ip_local_port_range).

    A port the kernel handed out (bind to 0) is one any client socket may take as its source port
    next: under the suite's own connect floods one did, between this check and the server's bind.
    Below the range no client takes it. Each pytest-xdist worker draws from a slice of its own, so
    two workers never pick the same one."""
    ports = _listening_ports()
    for _ in range(200):
        port = ports.start + secrets.randbelow(len(ports))
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {ports.start}-{ports.stop - 1}")


def _listening_ports() -> range:
    try:
        first_ephemeral = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        first_ephemeral = 32768
    low = max(1024, first_ephemeral - 12_000)
    workers = max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0) % workers
    span = max(1, (first_ephemeral - low) // workers)
    return range(low + worker * span, low + (worker + 1) * span)


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
    for attempt in range(1, START_ATTEMPTS + 1):
        port = free_port()
        arguments = [*command, "serve", "--port", str(port), *(["--dev"] if dev else [])]
        with log_path.open("wb") as log:
            process = subprocess.Popen(arguments, env=environ, stdout=log, stderr=subprocess.STDOUT)
        server = ServerProcess(process, port, state, log_path, arguments, environ)
        try:
            _wait_healthy(server)
            break
        except RuntimeError:
            _stop(process)
            if attempt == START_ATTEMPTS or IN_USE not in log_path.read_bytes():
                raise
    try:
        yield server
    finally:
        _stop(server.process)  # the last one started, after `start_again`


def _stop(process: subprocess.Popen[bytes]) -> None:
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
