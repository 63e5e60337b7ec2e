"""The servers under test, and starting and stopping them pinned to the server CPU.

Every server is one uvicorn worker on 127.0.0.1 with uvloop and httptools, started directly
under `taskset` (which execs it), so the process we start is the one that serves: its pid is
the one whose CPU time and RSS are read.

aql-mcp runs from a snapshot of `src/aql_mcp` taken when the run starts (first on PYTHONPATH,
ahead of the editable install), so every start in one run serves the same code while src/
keeps changing.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from collector import collector
from idp import idp

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
BIN = Path(sys.executable).parent
UVICORN_OPTS = "--host 127.0.0.1 --workers 1 --loop uvloop --http httptools --log-level warning --no-access-log"
SERVICE_CONFIG = BENCH / "service.yaml"
READY_SECONDS = 30.0
START_ATTEMPTS = 2
START_PAUSE_SECONDS = 5.0
SNAPSHOT_ATTEMPTS = 6


@dataclass(frozen=True)
class Target:
    name: str
    port: int
    stateful: bool
    argv: tuple[str, ...]
    authenticated: bool = False
    # Loaded with stateless MCP 2026-07-28 requests (no handshake, no session) instead of 2025-11-25 ones.
    modern: bool = False
    env: tuple[tuple[str, str], ...] = ()
    # aql-mcp exports its traces to the stand-in collector (every span at the default sampler, unless
    # `env` sets `tracing.sample_ratio`).
    traced: bool = False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    @property
    def handshakes(self) -> bool:
        """Whether the target has a handshake to time: the modern era has none (no `initialize`)."""
        return not self.modern


def _uvicorn(factory: str, port: int) -> tuple[str, ...]:
    return (
        str(BIN / "uvicorn"),
        "--app-dir",
        str(BENCH / "servers"),
        "--factory",
        factory,
        *UVICORN_OPTS.split(),
        "--port",
        str(port),
    )


def _service(port: int) -> tuple[str, ...]:
    # The service as an operator runs it: `aql-mcp serve`, which builds uvicorn.Config with loop and
    # http "auto", i.e. uvloop and httptools when installed (the driver checks they are loaded).
    return (str(BIN / "aql-mcp"), "serve", "--config", str(SERVICE_CONFIG), "--port", str(port))


MODERN_ON = (("AQL_MCP_MCP__MODERN_ERA", "true"),)
# One trace in a hundred sampled (`tracing.sample_ratio`): what traces cost an operator who samples.
SAMPLED = (("AQL_MCP_TRACING__SAMPLE_RATIO", "0.01"),)

TARGETS = (
    Target("aql-mcp", 18201, True, _service(18201), authenticated=True, traced=True),
    # The same service and configuration with the modern era on, loaded with 2026-07-28 requests.
    Target(
        "aql-mcp-modern", 18205, False, _service(18205), authenticated=True, modern=True, env=MODERN_ON, traced=True
    ),
    # Both again without a trace exporter (`tracing.otlp_endpoint` unset, the shipped default): what the
    # spans cost is the difference.
    Target("aql-mcp-untraced", 18207, True, _service(18207), authenticated=True),
    Target("aql-mcp-modern-untraced", 18208, False, _service(18208), authenticated=True, modern=True, env=MODERN_ON),
    # Both again exporting one trace in a hundred.
    Target("aql-mcp-sampled", 18209, True, _service(18209), authenticated=True, env=SAMPLED, traced=True),
    Target(
        "aql-mcp-modern-sampled",
        18210,
        False,
        _service(18210),
        authenticated=True,
        modern=True,
        env=MODERN_ON + SAMPLED,
        traced=True,
    ),
    Target("sdk-stateless-json", 18202, False, _uvicorn("sdk_echo:stateless_json", 18202)),
    # The same SDK server: a 2026-07-28 `MCP-Protocol-Version` takes the SDK's own modern path.
    Target("sdk-modern-json", 18206, False, _uvicorn("sdk_echo:stateless_json", 18206), modern=True),
    Target("sdk-stateful-sse", 18203, True, _uvicorn("sdk_echo:stateful_sse", 18203)),
    Target("ceiling", 18204, False, _uvicorn("ceiling:create_app", 18204)),
)


def snapshot_source(run_dir: Path) -> Path:
    """Copy src/aql_mcp into `run_dir`, retrying while it does not import (it may be mid-edit)."""
    target = (run_dir / "src").resolve()
    for attempt in range(1, SNAPSHOT_ATTEMPTS + 1):
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(ROOT / "src" / "aql_mcp", target / "aql_mcp", ignore=shutil.ignore_patterns("__pycache__"))
        problem = import_problem(target)
        if problem is None:
            return target
        print(f"[bench] src/ does not import ({problem}); attempt {attempt}", file=sys.stderr, flush=True)
        time.sleep(START_PAUSE_SECONDS)
    raise RuntimeError(f"src/aql_mcp did not import in {SNAPSHOT_ATTEMPTS} attempts")


def import_problem(source: Path) -> str | None:
    check = "import aql_mcp.app, aql_mcp.main, aql_mcp.testing.echo; print(aql_mcp.__file__)"
    env = {**os.environ, "PYTHONPATH": str(source), "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run([sys.executable, "-c", check], env=env, capture_output=True, text=True, timeout=60)  # noqa: S603
    if done.returncode != 0:
        return done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"
    if not done.stdout.strip().startswith(str(source)):
        return f"aql_mcp imported from {done.stdout.strip()}, not the snapshot"
    return None


@dataclass
class Server:
    target: Target
    process: subprocess.Popen[bytes]
    log_path: Path
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def pid(self) -> int:
        return self.process.pid


def start(target: Target, *, cpu: int, run_dir: Path, label: str, source: Path) -> Server:
    """Start `target` on `cpu` with a fresh state directory; return once it answers.

    A failed start is tried once more after a pause.
    """
    for attempt in range(1, START_ATTEMPTS + 1):
        try:
            return _start_once(target, cpu=cpu, run_dir=run_dir, label=label, source=source)
        except RuntimeError as exc:
            if attempt == START_ATTEMPTS:
                raise
            print(f"[bench] {target.name} did not start ({exc}); trying again", file=sys.stderr, flush=True)
            time.sleep(START_PAUSE_SECONDS)
    raise AssertionError("unreachable")


def _start_once(target: Target, *, cpu: int, run_dir: Path, label: str, source: Path) -> Server:
    if is_listening(target.port):
        raise RuntimeError(f"port {target.port} is already in use: stop what listens there first")
    state = run_dir / "state" / f"{target.name}-{label}"
    shutil.rmtree(state, ignore_errors=True)
    state.mkdir(parents=True)
    env = {**os.environ, "AQL_MCP_STORE__PATH": str(state), "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": str(source)}
    env.update(target.env)
    headers = {}
    if target.authenticated:
        env.update(idp().env(target.url))
        headers = {"Authorization": f"Bearer {idp().token(target.url)}"}
    if target.traced:
        # Traces on, as in production: spans exported to the stand-in collector (bench/collector.py),
        # every one at the default sampler, one trace in a hundred for the sampled targets.
        env.update(collector().env())
    log_path = run_dir / "logs" / f"{target.name}-{label}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("wb") as log:
        argv = ["taskset", "-c", str(cpu), *target.argv]
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT)  # noqa: S603
    server = Server(target, process, log_path, headers)
    try:
        wait_ready(server)
    except BaseException:
        stop(server)
        raise
    return server


def is_listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def wait_ready(server: Server) -> None:
    """Poll until the port accepts HTTP (any status); bounded by READY_SECONDS."""
    deadline = time.monotonic() + READY_SECONDS
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"{server.target.name} exited with {server.process.returncode}; see {server.log_path}")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{server.target.port}/", timeout=1).close()
            return
        except urllib.error.HTTPError:
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{server.target.name} did not answer within {READY_SECONDS}s; see {server.log_path}")


def stop(server: Server) -> None:
    """SIGTERM, then SIGKILL after 10 s: only the process this module started, by its pid."""
    if server.process.poll() is None:
        server.process.send_signal(signal.SIGTERM)
        try:
            server.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.process.kill()
            server.process.wait(timeout=10)


def loaded_modules(pid: int) -> set[str]:
    """Which of uvloop and httptools the process has mapped (the event loop and parser in use)."""
    maps = Path(f"/proc/{pid}/maps").read_text()
    return {name for name in ("uvloop", "httptools") if f"/{name}/" in maps}
