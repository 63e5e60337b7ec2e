"""The benchmark driver (run with the project venv's python: the stand-in IdP uses PyJWT).

    driver.py run --out DIR [--targets a,b] [--reps N] [--conc 1,16,64] [--duration 10] [--warmup 3]
    driver.py report DIR [DIR...] [--output bench/RESULTS.md]
    driver.py profile --out DIR [--duration 20] [--conc 64] [--rate 200] [--py-spy PATH]

`run` measures every target: for each repetition (target order rotated), it starts the target
pinned to the server CPU, runs the load phase, stops it, starts it again for the session phase,
stops it. A modern-era target (MCP 2026-07-28) has no handshake, hence no session phase. The
driver itself, wrk and py-spy run on the load CPU. Rows go to DIR/results.jsonl.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import asdict
from importlib import metadata
from pathlib import Path
from typing import Any

from handshakes import session_phase
from load import LoadOptions, load_phase, wrk_argv
from procfs import cpu_model
from profiling import profile_service
from report import write_report
from stacks import Profiled, write_profile
from targets import TARGETS, Server, Target, loaded_modules, snapshot_source, start, stop

PACKAGES = (
    "aql-mcp",
    "mcp",
    "uvicorn",
    "starlette",
    "uvloop",
    "httptools",
    "anyio",
    "pydantic",
    "orjson",
    "structlog",
    "jsonschema",
    "pyjwt",
    "sse-starlette",
)


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    args.command(args)
    return 0


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="driver.py", description=__doc__.split("\n")[0])
    commands = root.add_subparsers(required=True)
    run_cmd = commands.add_parser("run", help="measure the targets")
    run_cmd.add_argument("--out", type=Path, required=True)
    run_cmd.add_argument("--targets", default=",".join(t.name for t in TARGETS))
    run_cmd.add_argument("--reps", type=int, default=1)
    run_cmd.add_argument("--conc", default="1,16,64")
    run_cmd.add_argument("--sessions", type=int, default=1000, help="handshakes in the session phase")
    run_cmd.add_argument("--source", type=Path, help="serve this copy of aql_mcp (an A/B baseline, a run's src/)")
    _add_load_options(run_cmd)
    run_cmd.set_defaults(command=run)

    report_cmd = commands.add_parser("report", help="write RESULTS.md from one or more run directories")
    report_cmd.add_argument("runs", type=Path, nargs="+")
    report_cmd.add_argument("--output", type=Path, default=Path(__file__).parent / "RESULTS.md")
    report_cmd.set_defaults(command=lambda a: write_report(a.runs, a.output))

    profile_cmd = commands.add_parser("profile", help="py-spy the service under load")
    profile_cmd.add_argument("--out", type=Path, required=True)
    profile_cmd.add_argument("--targets", default="aql-mcp-modern,aql-mcp", help="the service targets to profile")
    profile_cmd.add_argument(
        "--flames", type=Path, default=Path(__file__).parent / "profiles", help="where the SVGs go"
    )
    profile_cmd.add_argument("--conc", type=int, default=64)
    profile_cmd.add_argument("--rate", type=int, default=200, help="py-spy samples per second")
    profile_cmd.add_argument("--py-spy", default="py-spy")
    profile_cmd.add_argument(
        "--gil", action="store_true", help="only samples of the thread holding the GIL (py-spy --gil)"
    )
    profile_cmd.add_argument("--source", type=Path, help="serve this copy of aql_mcp (e.g. a run's src/)")
    profile_cmd.add_argument("--output", type=Path, default=Path(__file__).parent / "PROFILE.md")
    _add_load_options(profile_cmd, duration=20)
    profile_cmd.set_defaults(command=profile)
    return root


def _add_load_options(cmd: argparse.ArgumentParser, *, duration: int = 10) -> None:
    cmd.add_argument("--duration", type=int, default=duration, help="seconds of each measured wrk run")
    cmd.add_argument("--warmup", type=int, default=3, help="seconds of the warm-up wrk run")
    cmd.add_argument("--server-cpu", type=int, default=0)
    cmd.add_argument("--load-cpu", type=int, default=1)
    cmd.add_argument("--quiet", type=float, default=0.10, help="CPU share others may use before a run")
    cmd.add_argument("--quiet-wait", type=float, default=30.0, help="seconds to wait for a quiet CPU at most")
    cmd.add_argument("--disturbed", type=float, default=0.15, help="others' share of the server CPU to rerun at")
    cmd.add_argument("--retries", type=int, default=1, help="reruns of a disturbed measured run")
    cmd.add_argument("--nice", type=int, default=0, help="niceness of the driver, the servers and wrk (e.g. -10)")


def load_options(args: argparse.Namespace) -> LoadOptions:
    return LoadOptions(
        duration=args.duration,
        warmup=args.warmup,
        server_cpu=args.server_cpu,
        load_cpu=args.load_cpu,
        quiet=args.quiet,
        quiet_wait=args.quiet_wait,
        disturbed=args.disturbed,
        retries=args.retries,
    )


def place_driver(args: argparse.Namespace) -> None:
    """The driver on the load CPU; with --nice, it and every process it starts (they inherit it) at that niceness."""
    os.sched_setaffinity(0, {args.load_cpu})
    if args.nice:
        os.setpriority(os.PRIO_PROCESS, 0, args.nice)


def run(args: argparse.Namespace) -> None:
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    place_driver(args)
    options = load_options(args)
    targets = select(args.targets)
    source = args.source.resolve() if args.source else snapshot_source(out)
    (out / "versions.json").write_text(json.dumps(versions(source), indent=2))
    (out / "commands.json").write_text(json.dumps(commands(targets, options), indent=2))
    settings = {**asdict(options), "reps": args.reps, "sessions": args.sessions, "nice": args.nice, "conc": args.conc}
    settings["targets"] = [t.name for t in targets]
    (out / "options.json").write_text(json.dumps(settings))
    concurrencies = [int(c) for c in args.conc.split(",")]
    for rep in range(args.reps):
        for target in targets[rep % len(targets) :] + targets[: rep % len(targets)]:
            print(f"[bench] rep {rep + 1}/{args.reps}: {target.name}", file=sys.stderr, flush=True)
            for row in measure_target(target, rep + 1, concurrencies, args.sessions, options, out, source):
                # Written as each phase ends, so a later failure keeps what was measured.
                with (out / "results.jsonl").open("a") as results:
                    results.write(json.dumps(row) + "\n")
                print(f"[bench]   {summary_line(row)}", file=sys.stderr, flush=True)


def select(names: str) -> list[Target]:
    by_name = {t.name: t for t in TARGETS}
    unknown = [n for n in names.split(",") if n not in by_name]
    if unknown:
        raise SystemExit(f"unknown targets {unknown}; known: {list(by_name)}")
    return [by_name[n] for n in names.split(",")]


def measure_target(
    target: Target, rep: int, concurrencies: list[int], sessions: int, options: LoadOptions, out: Path, source: Path
) -> Iterator[dict[str, Any]]:
    base = {"target": target.name, "rep": rep}
    server = start(target, cpu=options.server_cpu, run_dir=out, label=f"load-r{rep}", source=source)
    try:
        modules = sorted(loaded_modules(server.pid))
        rows = [
            {**base, "phase": "load", "modules": modules, **r} for r in load_phase(server, concurrencies, options, out)
        ]
    finally:
        stop(server)
    rows[-1]["log"] = log_summary(server)
    yield from rows
    if not target.handshakes:
        return
    server = start(target, cpu=options.server_cpu, run_dir=out, label=f"sessions-r{rep}", source=source)
    try:
        row = {**base, "phase": "sessions", **session_phase(server, count=sessions, deadline=120.0, options=options)}
    finally:
        stop(server)
    row["log"] = log_summary(server)
    yield row


def log_summary(server: Server) -> dict[str, Any]:
    """What the server logged: aql-mcp's request lines by status, and every line that reports a problem."""
    statuses: dict[str, int] = {}
    problems = []
    for line in server.log_path.read_text(errors="replace").splitlines():
        record = _json_or_none(line)
        if record is not None and record.get("event") == "http_request":
            statuses[str(record.get("status"))] = statuses.get(str(record.get("status")), 0) + 1
        if _is_problem(line, record, plain_text_ok=server.target.authenticated):
            problems.append(line[:500])
    compress(server.log_path)
    return {"http_status": statuses, "problem_lines": len(problems), "problems": problems[:10]}


def compress(path: Path) -> None:
    """Gzip a server log once it is summarised: aql-mcp writes two lines per call, ~100 MB a run."""
    with path.open("rb") as plain, gzip.open(path.with_name(path.name + ".gz"), "wb") as packed:
        shutil.copyfileobj(plain, packed)
    path.unlink()


def _json_or_none(line: str) -> dict[str, Any] | None:
    if not line.startswith("{"):
        return None
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def _is_problem(line: str, record: dict[str, Any] | None, *, plain_text_ok: bool) -> bool:
    if record is not None:
        return record.get("level") not in ("debug", "info")
    if not line.strip():
        return False
    # aql-mcp prints its development banner in plain text; uvicorn at warning prints nothing when all is well.
    return not plain_text_ok or any(w in line.lower() for w in ("error", "warning", "traceback", "exception"))


def profile(args: argparse.Namespace) -> None:
    args.out.mkdir(parents=True, exist_ok=True)
    place_driver(args)
    source = args.source.resolve() if args.source else snapshot_source(args.out)
    options = load_options(args)
    profiles: list[Profiled] = []
    args.flames.mkdir(parents=True, exist_ok=True)
    for target in args.targets.split(","):
        raw, svg, row = profile_service(
            args.out,
            target=target,
            conc=args.conc,
            rate=args.rate,
            py_spy=args.py_spy,
            options=options,
            source=source,
            gil=args.gil,
        )
        shutil.copyfile(svg, args.flames / svg.name)
        profiles.append(Profiled(target, raw, row))
    found = versions(source, py_spy=args.py_spy)
    saved = {"profiles": [{"target": p.target, "raw": str(p.raw), "row": p.row} for p in profiles], "versions": found}
    (args.out / "profile.json").write_text(json.dumps(saved, indent=2))
    write_profile(profiles, args.output, versions=found, source=source)


def versions(source: Path, *, py_spy: str | None = None) -> dict[str, str]:
    found = {"python": platform.python_version(), "machine": machine()}
    found["wrk"] = _first_line(["wrk", "--version"])
    found["wrk (Debian package)"] = _first_line(["dpkg-query", "-W", "-f", "${Version}", "wrk"])
    for package in PACKAGES:
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package] = "not installed"
    found["aql-mcp source (sha256 of the snapshot of src/aql_mcp/**/*.py)"] = source_digest(source)
    if py_spy is not None:
        found["py-spy"] = _first_line([py_spy, "--version"])
    return found


def source_digest(source: Path) -> str:
    """Which source was measured: src/ keeps changing, so each run serves (and names) a snapshot."""
    digest = hashlib.sha256()
    for path in sorted(source.rglob("*.py")):
        digest.update(path.relative_to(source).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def machine() -> str:
    uname = os.uname()
    return f"{os.cpu_count()} x {cpu_model()} (/proc/cpuinfo), Linux {uname.release} {uname.machine}"


def _first_line(argv: list[str]) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False)  # noqa: S603
    except OSError:
        return "not found"
    return (done.stdout or done.stderr).strip().splitlines()[0] if (done.stdout or done.stderr).strip() else "unknown"


def commands(targets: list[Target], options: LoadOptions) -> dict[str, Any]:
    """The exact server (with its own environment) and wrk command lines (at c=64), with the bearer token left out."""
    out: dict[str, Any] = {}
    for target in targets:
        headers = {"Authorization": "Bearer $TOKEN"} if target.authenticated else {}
        sessions = Path(f"sessions-{target.name}-c64.txt") if target.stateful else None
        environment = [f"{name}={value}" for name, value in target.env]
        out[target.name] = {
            "server": [*environment, "taskset", "-c", str(options.server_cpu), *target.argv],
            "wrk": wrk_argv(
                target, headers, conc=64, duration=options.duration, sessions=sessions, cpu=options.load_cpu
            ),
        }
    return out


def summary_line(row: dict[str, Any]) -> str:
    if row["phase"] == "load":
        return (
            f"c={row['conc']}: {row['calls_per_s']:.0f} calls/s, "
            f"p50 {row['p50_ms']:.2f} ms, p99 {row['p99_ms']:.2f} ms, "
            f"{row['server_cpu_us_per_call']:.0f} us CPU/call, bad {row['bad']}, others on server CPU "
            f"{row['others_on_server_cpu']:.0%}"
        )
    per_session = row["kib_per_session"]
    return (
        f"handshake p50 {row['handshake_p50_ms']:.2f} ms, p99 {row['handshake_p99_ms']:.2f} ms, "
        f"{row['server_cpu_ms_per_handshake']:.2f} ms CPU/handshake, "
        f"{'n/a' if per_session is None else f'{per_session:.1f}'} KiB/session"
    )


if __name__ == "__main__":
    sys.exit(main())
