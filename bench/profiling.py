"""Sampling the service under load: py-spy records the server's stacks during one wrk run.

The service runs as in `run` (bench/service.yaml, pinned to the server CPU); py-spy and wrk run
on the load CPU. py-spy reads the stacks without pausing the process (`--nonblocking`); reading
them still takes some of the load CPU, so throughput during the profile is a little below the
benchmark's.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

from load import LoadOptions, check_server, measure_once, open_sessions, run_wrk, wait_quiet, wrk_argv
from targets import TARGETS, Server, start, stop

ATTACH_SECONDS = 1.0


def profile_service(
    out: Path,
    *,
    target: str,
    conc: int,
    rate: int,
    py_spy: str,
    options: LoadOptions,
    source: Path,
    gil: bool = False,
) -> tuple[Path, Path, dict[str, Any]]:
    """Record `options.duration` seconds of `target` at `conc`: the raw stacks (PROFILE.md's tables),
    then as long again as a flame graph (an SVG py-spy draws); both paths and the wrk row of the first.
    `gil`: keep only the samples of the thread holding the GIL (py-spy `--gil`)."""
    service = next(t for t in TARGETS if t.name == target)
    raw, svg = out / f"profile-{target}.raw.txt", out / f"{target}.svg"
    server = start(service, cpu=options.server_cpu, run_dir=out, label=f"profile-{target}", source=source)
    try:
        check_server(server)
        sessions = open_sessions(server, conc, out / f"sessions-profile-{target}-c{conc}.txt")
        argv = wrk_argv(
            service, server.headers, conc=conc, duration=options.duration, sessions=sessions, cpu=options.load_cpu
        )
        warm = wrk_argv(
            service, server.headers, conc=conc, duration=options.warmup, sessions=sessions, cpu=options.load_cpu
        )
        run_wrk(warm, options.warmup)
        waited = wait_quiet(server.pid, options)
        # What both recordings share: which process, how often, and how (never stopping it).
        spy = [py_spy, "record", "--pid", str(server.pid), "--rate", str(rate), "--nonblocking"]
        spy += ["--gil"] if gil else []
        row = _recorded(out, server, argv, options, spy=spy, output=raw, form="raw")
        _recorded(out, server, argv, options, spy=spy, output=svg, form="flamegraph")
    finally:
        stop(server)
    return (
        raw,
        svg,
        {**row, "conc": conc, "rate": rate, "gil": gil, "duration": options.duration, "quiet_wait_s": waited},
    )


def _recorded(
    out: Path,
    server: Server,
    argv: list[str],
    options: LoadOptions,
    *,
    spy: list[str],
    output: Path,
    form: str,
) -> dict[str, Any]:
    """One wrk run with py-spy (`spy`: its command line up to what differs per recording) recording
    the server into `output` (`form`: raw or flamegraph)."""
    process = subprocess.Popen(  # noqa: S603
        [  # noqa: S607
            "taskset",
            "-c",
            str(options.load_cpu),
            *spy,
            "--duration",
            str(options.duration + 2),
            "--format",
            form,
            "--output",
            str(output),
        ],
        stdout=subprocess.DEVNULL,
        stderr=(out / "py-spy.log").open("ab"),
    )
    try:
        time.sleep(ATTACH_SECONDS)
        row = measure_once(server, argv, options, quiet=False)
        process.wait(timeout=options.duration + 60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
    if process.returncode != 0 or not output.exists():
        raise RuntimeError(f"py-spy failed ({process.returncode}); see {out / 'py-spy.log'}")
    return row
