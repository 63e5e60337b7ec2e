"""The load phase: closed-loop wrk runs of `tools/call echo`, and the server CPU they cost.

For each concurrency: (stateful servers) one session per connection, opened just before; a
warm-up run; then the measured run, with the server's utime+stime read before and after. The
machine is shared, so each measured run first waits (bounded) for the CPUs to be quiet, records
what other processes used during it, and is repeated (bounded) when they took much of them.
"""

from __future__ import annotations

import json
import resource
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from client import PROTOCOL_VERSION, TEXT, McpClient, modern_echo
from collector import collector
from procfs import busy_seconds, cpu_seconds
from targets import BENCH, Server, Target

LUA = BENCH / "echo_call.lua"
RESULT_PREFIX = "BENCH_RESULT "
QUIET_SAMPLE_SECONDS = 1.0


@dataclass(frozen=True)
class LoadOptions:
    """How long and where to run wrk, and how much noise from other processes to accept."""

    duration: int
    warmup: int
    server_cpu: int
    load_cpu: int
    quiet: float  # share of a CPU that others may use in the window before a measured run
    quiet_wait: float  # seconds to wait for such a window at most
    disturbed: float  # share of the server CPU taken by others that makes a run count as disturbed
    retries: int  # extra attempts of a disturbed run


def load_phase(server: Server, concurrencies: list[int], options: LoadOptions, work: Path) -> list[dict[str, Any]]:
    check_server(server)
    rows = []
    for conc in concurrencies:
        sessions = open_sessions(server, conc, work / f"sessions-{server.target.name}-c{conc}.txt")
        target, headers, cpu = server.target, server.headers, options.load_cpu
        run_wrk(
            wrk_argv(target, headers, conc=conc, duration=options.warmup, sessions=sessions, cpu=cpu), options.warmup
        )
        argv = wrk_argv(target, headers, conc=conc, duration=options.duration, sessions=sessions, cpu=cpu)
        rows.append({"conc": conc, **measure(server, argv, options)})
    return rows


def check_server(server: Server) -> None:
    """One checked tool call (after a handshake, in the legacy era) before any load: a broken target fails fast."""
    client = McpClient(server.target.url, headers=server.headers)
    try:
        if server.target.modern:
            client.check_modern_echo()
        else:
            client.check_echo(client.handshake())
    finally:
        client.close()


def open_sessions(server: Server, count: int, path: Path) -> Path | None:
    if not server.target.stateful:
        return None
    client = McpClient(server.target.url, headers=server.headers)
    try:
        ids = [client.handshake() for _ in range(count)]
    finally:
        client.close()
    if not all(ids):
        raise RuntimeError(f"{server.target.name}: initialize returned no Mcp-Session-Id")
    path.write_text("".join(f"{session}\n" for session in ids))
    return path


def wrk_argv(
    target: Target, headers: dict[str, str], *, conc: int, duration: int, sessions: Path | None, cpu: int
) -> list[str]:
    argv = ["taskset", "-c", str(cpu), "wrk", "-t1", f"-c{conc}", f"-d{duration}s", "--latency", "--timeout", "5s"]
    argv += ["-s", str(LUA), target.url]
    protocol, body = era_request(target)
    for name, value in {**headers, **protocol}.items():
        argv += ["-H", f"{name}: {value}"]
    return [*argv, "--", TEXT, str(sessions or "-"), *body]


def era_request(target: Target) -> tuple[dict[str, str], list[str]]:
    """The protocol headers wrk sends, and (modern era) the body whose `"id":0` it replaces per request."""
    if not target.modern:
        return {"MCP-Protocol-Version": PROTOCOL_VERSION}, []
    headers, message = modern_echo(0)
    return headers, [json.dumps(message, separators=(",", ":"))]


def run_wrk(argv: list[str], duration: int) -> tuple[dict[str, Any], str, float]:
    """Run wrk once; its BENCH_RESULT line, its stderr (bad responses), its CPU seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=duration + 60, check=False)  # noqa: S603
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    line = next((x for x in done.stdout.splitlines() if x.startswith(RESULT_PREFIX)), None)
    if done.returncode != 0 or line is None:
        raise RuntimeError(f"wrk failed ({done.returncode}): {done.stdout[-600:]} {done.stderr[-600:]}")
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return json.loads(line[len(RESULT_PREFIX) :]), done.stderr.strip(), cpu


def measure(server: Server, argv: list[str], options: LoadOptions) -> dict[str, Any]:
    """The measured run, repeated while disturbed (bounded); the least disturbed attempt wins."""
    attempts = []
    for attempt in range(1 + options.retries):
        row = measure_once(server, argv, options)
        row["attempt"] = attempt + 1
        attempts.append(row)
        if row["others_on_server_cpu"] <= options.disturbed:
            break
    best = min(attempts, key=lambda r: r["others_on_server_cpu"])
    best["attempts"] = len(attempts)
    return best


def measure_once(server: Server, argv: list[str], options: LoadOptions, *, quiet: bool = True) -> dict[str, Any]:
    waited = wait_quiet(server.pid, options) if quiet else None
    spans_before = collector().spans
    cpu_before, busy_before, started = cpu_seconds(server.pid), busy_seconds(), time.monotonic()
    result, stderr, wrk_cpu = run_wrk(argv, options.duration)
    cpu_after, busy_after, elapsed = cpu_seconds(server.pid), busy_seconds(), time.monotonic() - started
    # Spans arrive in batches as the exporter sends them: right to within one batch (512 spans).
    spans = collector().spans - spans_before
    server_cpu = cpu_after - cpu_before
    calls = result["requests"]
    row = {
        **result,
        "calls_per_s": calls / result["duration_s"],
        "server_cpu_s": server_cpu,
        "server_cpu_us_per_call": server_cpu / calls * 1e6 if calls else None,
        "server_cpu_share": server_cpu / elapsed,
        "wrk_cpu_share": wrk_cpu / elapsed,
        "others_on_server_cpu": _others(busy_before, busy_after, options.server_cpu, server_cpu, elapsed),
        "others_on_load_cpu": _others(busy_before, busy_after, options.load_cpu, wrk_cpu, elapsed),
        "quiet_wait_s": waited,
        "spans_per_call": spans / calls if calls and server.target.traced else None,
        "bad_samples": stderr.splitlines()[:3],
    }
    if server.process.poll() is not None:
        raise RuntimeError(f"{server.target.name} exited during the run; see {server.log_path}")
    return row


def wait_quiet(pid: int, options: LoadOptions) -> float:
    """Wait until, for one second, others use at most `quiet` of either CPU; seconds waited (< 0: gave up)."""
    deadline = time.monotonic() + options.quiet_wait
    waited = 0.0
    while True:
        own_before, busy_before = cpu_seconds(pid), busy_seconds()
        time.sleep(QUIET_SAMPLE_SECONDS)
        own = cpu_seconds(pid) - own_before
        busy = busy_seconds()
        others = max(
            _others(busy_before, busy, options.server_cpu, own, QUIET_SAMPLE_SECONDS),
            _others(busy_before, busy, options.load_cpu, 0.0, QUIET_SAMPLE_SECONDS),
        )
        if others <= options.quiet:
            return waited
        waited += QUIET_SAMPLE_SECONDS
        if time.monotonic() > deadline:
            return -waited


def _others(before: dict[int, float], after: dict[int, float], cpu: int, ours: float, elapsed: float) -> float:
    """Share of `cpu` used by processes other than ours over `elapsed` seconds."""
    return round(max(0.0, after[cpu] - before[cpu] - ours) / elapsed, 3)
