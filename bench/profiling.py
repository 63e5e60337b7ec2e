"""Sampling the service under load: py-spy records the server's stacks during one wrk run.

The service runs as in `run` (bench/service.yaml, pinned to the server CPU); py-spy and wrk run
on the load CPU. py-spy pauses the process for each sample (its default, for exact stacks), so
throughput during the profile is a little below the benchmark's.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

from load import LoadOptions, check_server, measure_once, open_sessions, run_wrk, wait_quiet, wrk_argv
from targets import TARGETS, start, stop

ATTACH_SECONDS = 1.0


def profile_service(
    out: Path, *, target: str, conc: int, rate: int, py_spy: str, options: LoadOptions, source: Path
) -> tuple[Path, dict[str, Any]]:
    """Record `options.duration` seconds of `target` at `conc`; the raw stacks and the wrk row."""
    service = next(t for t in TARGETS if t.name == target)
    raw = out / f"profile-{target}.raw.txt"
    server = start(service, cpu=options.server_cpu, run_dir=out, label=f"profile-{target}", source=source)
    try:
        check_server(server)
        sessions = open_sessions(server, conc, out / f"sessions-profile-c{conc}.txt")
        headers, cpu = server.headers, options.load_cpu
        run_wrk(
            wrk_argv(service, headers, conc=conc, duration=options.warmup, sessions=sessions, cpu=cpu), options.warmup
        )
        waited = wait_quiet(server.pid, options)
        spy = subprocess.Popen(  # noqa: S603
            [  # noqa: S607
                "taskset",
                "-c",
                str(cpu),
                py_spy,
                "record",
                "--pid",
                str(server.pid),
                "--rate",
                str(rate),
                "--duration",
                str(options.duration + 2),
                "--format",
                "raw",
                "--output",
                str(raw),
            ],
            stdout=subprocess.DEVNULL,
            stderr=(out / "py-spy.log").open("wb"),
        )
        try:
            time.sleep(ATTACH_SECONDS)
            row = measure_once(
                server,
                wrk_argv(service, headers, conc=conc, duration=options.duration, sessions=sessions, cpu=cpu),
                options,
                quiet=False,
            )
            spy.wait(timeout=options.duration + 60)
        finally:
            if spy.poll() is None:
                spy.kill()
                spy.wait(timeout=10)
    finally:
        stop(server)
    if spy.returncode != 0 or not raw.exists():
        raise RuntimeError(f"py-spy failed ({spy.returncode}); see {out / 'py-spy.log'}")
    return raw, {**row, "conc": conc, "rate": rate, "duration": options.duration, "quiet_wait_s": waited}
