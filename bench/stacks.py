"""Where the service's time goes: py-spy's raw stacks grouped by layer, written to PROFILE.md.

A sample is charged to the frame nearest the leaf that belongs to a layer: an `aql_mcp/<file>`
frame, or a library's. Standard-library frames (asyncio, json, uuid, re, ...) belong to no layer:
they are charged to whoever called them. orjson and sqlite3 are C and leave no frame: a sample
in them shows as the `aql_mcp` line that called them, which is read from the source to tell them
apart.

    python bench/stacks.py PROFILE_DIR [--output bench/PROFILE.md]   # rewrite PROFILE.md from a profile run
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SRC = Path(__file__).resolve().parent.parent / "src"
FRAME = re.compile(r"^(?P<function>.*) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")
NOTES_MARKER = "<!-- notes: written by hand; everything below this line is kept when the file is regenerated -->"

# aql_mcp files (relative to the package) -> layer; middleware are their own layers by file.
AQL_LAYERS = {
    "endpoint/legacy/transport.py": "transport",
    "endpoint/legacy/cancellation.py": "transport",
    "endpoint/legacy/exchange.py": "transport",
    "responses.py": "transport",
    "scope.py": "transport",
    "endpoint/legacy/events.py": "transport",
    "jsonrpc/": "jsonrpc",
    "protocol/": "protocol/tools",
    "protocol/primitives.py": "protocol/tools",
    "protocol/content.py": "protocol/tools",
    "testing/echo.py": "protocol/tools",
    "observability/logging.py": "logging/structlog",
    "endpoint/legacy/sessions.py": "sessions/store",
    "store/": "sessions/store",
    "auth/": "middleware: auth",
    "observability/telemetry.py": "telemetry (per-call log, metrics, span)",
    "observability/metrics.py": "metrics (observability/metrics.py, prometheus_client)",
    "observability/tracing.py": "tracing (observability/tracing.py, opentelemetry)",
}
LIBRARY_LAYERS = {
    "uvicorn": "uvicorn/httptools/event loop",
    "httptools": "uvicorn/httptools/event loop",
    "uvloop": "uvicorn/httptools/event loop",
    "starlette": "starlette (routing, its own error/exception middleware)",
    "anyio": "anyio (cancel scopes, events)",
    "sniffio": "anyio (cancel scopes, events)",
    "structlog": "logging/structlog",
    "logging": "logging/structlog",
    "jsonschema": "protocol/tools",
    "referencing": "protocol/tools",
    "rpds": "protocol/tools",
    "jwt": "middleware: auth",
    "cryptography": "middleware: auth",
    "sqlite3": "sessions/store",
    "orjson": "orjson",
    "prometheus_client": "metrics (observability/metrics.py, prometheus_client)",
    "opentelemetry": "tracing (observability/tracing.py, opentelemetry)",
}
# Issue 25's view of a call, in the order of its path: each sample goes to the category of the frame
# nearest the leaf that has one (an `aql_mcp` file by prefix, else a library), so a library is charged
# to the category of the code that called it only when it has none of its own.
CATEGORY_FILES = (
    ("observability/logging.py", "log"),
    ("middleware/access.py", "log"),
    ("middleware/request_id.py", "log"),
    ("observability/metrics.py", "metrics"),
    ("observability/mcp_metrics.py", "metrics"),
    ("observability/tracing.py", "trace"),
    ("observability/mcp_request.py", "trace"),
    ("middleware/tracing.py", "trace"),
    ("observability/telemetry.py", "log"),
    ("audit/", "audit"),
    ("auth/", "auth"),
    ("middleware/auth.py", "auth"),
    ("middleware/", "limits"),
    ("bucket.py", "limits"),
    ("timeouts.py", "limits"),
    ("server/", "uvicorn"),
    ("jsonrpc/messages.py", "parse"),
    ("jsonrpc/nesting.py", "parse"),
    ("endpoint/media.py", "parse"),
    ("endpoint/modern/rounds.py", "parse"),
    ("endpoint/modern/mirrored.py", "parse"),
    ("protocol/lifecycle.py", "parse"),
    ("protocol/param_headers.py", "parse"),
    ("responses.py", "encode"),
    ("endpoint/modern/reply.py", "encode"),
    ("endpoint/legacy/exchange.py", "encode"),
    ("endpoint/sse.py", "encode"),
    ("protocol/results.py", "encode"),
    ("protocol/result_limit.py", "encode"),
    ("testing/echo.py", "handler"),
    ("", "dispatch"),
)
CATEGORY_LIBRARIES = {
    "uvicorn": "uvicorn",
    "httptools": "uvicorn",
    "uvloop": "uvicorn",
    "starlette": "uvicorn",
    "structlog": "log",
    "logging": "log",
    "jwt": "auth",
    "cryptography": "auth",
    "prometheus_client": "metrics",
    "opentelemetry": "trace",
    "google": "trace",
    "requests": "trace",
    "urllib3": "trace",
    "orjson": "encode",
    "anyio": "dispatch",
    "jsonschema": "dispatch",
    "referencing": "dispatch",
    "sqlite3": "dispatch",
}
# Helper threads by the function they run: py-spy shortens the paths of namespace packages (an OTLP
# exporter's frames show as `common/_internal/...`), so a thread is known by its loop instead.
THREAD_CATEGORIES = {"BatchProcessor.worker": "trace", "BatchSpanProcessor.worker": "trace"}
CATEGORIES = ("uvicorn", "parse", "auth", "limits", "dispatch", "handler", "encode", "log", "metrics", "trace", "audit")
# A thread's stack that ends in one of these is waiting, not working: py-spy still reports an idle pool
# thread blocked on its queue (a lock wait it does not see as idle), which is not the server's CPU.
WAITING_LEAVES = {"_worker", "wait", "get", "_wait_for_tstate_lock", "select", "acquire", "_worker_loop", "sleep"}
# The roots of every stack: never where time is spent.
ROOT_FILES = ("aql_mcp/main.py", "aql_mcp/app.py")
PASS_THROUGH = set(sys.stdlib_module_names) | {"<string>", "<frozen"}


@dataclass(frozen=True)
class Frame:
    function: str
    file: str
    line: int | None

    @property
    def top(self) -> str:
        """The top-level package or module the frame's file belongs to."""
        if self.file.startswith("<attrs generated methods "):
            return self.file.removeprefix("<attrs generated methods ").split(".")[0]
        first = self.file.split("/")[0]
        return first.split(" ")[0].removesuffix(".py")


def parse(raw: Path) -> list[tuple[list[Frame], int]]:
    stacks = []
    for line in raw.read_text().splitlines():
        text, _, count = line.rpartition(" ")
        frames = [_frame(part) for part in text.split(";")]
        stacks.append(([f for f in frames if f is not None], int(count)))
    return stacks


def _frame(part: str) -> Frame | None:
    match = FRAME.match(part)
    if match is None:
        return None
    line = match["line"]
    return Frame(match["function"], match["file"], int(line) if line else None)


def is_aql(frame: Frame) -> bool:
    return frame.file.startswith("aql_mcp/") and frame.file not in ROOT_FILES


def aql_layer(frame: Frame) -> str:
    path = frame.file.removeprefix("aql_mcp/")
    if path.startswith("middleware/"):
        return "middleware: " + path.removeprefix("middleware/").removesuffix(".py")
    return next((layer for prefix, layer in AQL_LAYERS.items() if path.startswith(prefix)), f"aql_mcp: {path}")


class SourceLines:
    """The source the profiled process ran, read line by line to see what a leaf line calls."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.files: dict[str, list[str]] = {}

    def line(self, file: str, number: int) -> str:
        if file not in self.files:
            path = self.root / file
            self.files[file] = path.read_text().splitlines() if path.exists() else []
        lines = self.files[file]
        return lines[number - 1] if 0 < number <= len(lines) else ""

    def c_library_called(self, frame: Frame) -> str | None:
        """`orjson` when the leaf line calls it (it is C: py-spy shows the caller's line)."""
        if frame.line is None:
            return None
        return "orjson" if "orjson." in self.line(frame.file, frame.line) else None


def layer_of(stack: list[Frame], sources: SourceLines) -> str:
    """The layer of the frame nearest the leaf that has one; C calls are read from the calling line."""
    for index, frame in enumerate(reversed(stack)):
        if is_aql(frame):
            called = sources.c_library_called(frame) if index == 0 else None
            return called or aql_layer(frame)
        if frame.top in LIBRARY_LAYERS:
            return LIBRARY_LAYERS[frame.top]
        if frame.top in PASS_THROUGH or frame.file.startswith("<") or frame.file in ROOT_FILES:
            continue
        return f"other: {frame.top}"
    return "uvicorn/httptools/event loop"


def owner_of(stack: list[Frame]) -> str:
    """The `aql_mcp/<file>` frame nearest the leaf, else the top-level library nearest the leaf."""
    for frame in reversed(stack):
        if is_aql(frame):
            return frame.file
    for frame in reversed(stack):
        if frame.top not in PASS_THROUGH and not frame.file.startswith("<") and frame.file not in ROOT_FILES:
            return frame.top
    return "event loop"


def category_of(stack: list[Frame], sources: SourceLines) -> str:
    """Issue 25's category of a sample (CATEGORY_FILES); stacks with no frame of ours are uvicorn's loop."""
    for frame in stack:
        if frame.function in THREAD_CATEGORIES:
            return THREAD_CATEGORIES[frame.function]
    for index, frame in enumerate(reversed(stack)):
        if is_aql(frame):
            if index == 0 and sources.c_library_called(frame):
                return "encode"
            path = frame.file.removeprefix("aql_mcp/")
            return next(category for prefix, category in CATEGORY_FILES if path.startswith(prefix))
        if frame.top in CATEGORY_LIBRARIES:
            return CATEGORY_LIBRARIES[frame.top]
    return "uvicorn"


def working(stacks: list[tuple[list[Frame], int]]) -> list[tuple[list[Frame], int]]:
    """The samples of work: a helper thread parked on its queue or condition is left out."""
    kept = []
    for frames, count in stacks:
        parked = len(frames) > 1 and frames[0].function.startswith("Thread._bootstrap")
        if parked and frames[-1].function.rsplit(".", 1)[-1] in WAITING_LEAVES:
            continue
        kept.append((frames, count))
    return kept


def per_call(stacks: list[tuple[list[Frame], int]], sources: SourceLines, cpu_us: float) -> list[str]:
    """Each category's share of the samples, as microseconds of the measured CPU per call."""
    counts: Counter[str] = Counter()
    threads: Counter[str] = Counter()
    for frames, count in stacks:
        category = category_of(frames, sources)
        counts[category] += count
        if frames and frames[0].function.startswith("Thread._bootstrap"):
            threads[category] += count
    total = sum(counts.values()) or 1
    lines = ["| part of the call | µs per call | % | of which in other threads |", "|---|---:|---:|---:|"]
    for category in CATEGORIES:
        share = counts[category] / total
        other = f"{threads[category] / total * cpu_us:.0f} µs" if threads[category] else ""
        lines.append(f"| {category} | {share * cpu_us:.0f} | {100 * share:.1f} | {other} |")
    return [*lines, f"| **all** | **{cpu_us:.0f}** | 100 | |"]


def tally(stacks: list[tuple[list[Frame], int]], sources: SourceLines) -> dict[str, Counter[str]]:
    tables: dict[str, Counter[str]] = {
        "layer": Counter(),
        "owner": Counter(),
        "inclusive": Counter(),
        "leaf": Counter(),
    }
    for frames, count in stacks:
        tables["layer"][layer_of(frames, sources)] += count
        tables["owner"][owner_of(frames)] += count
        for file in {f.file for f in frames if is_aql(f)}:
            tables["inclusive"][file] += count
        leaf = frames[-1] if frames else Frame("?", "?", None)
        tables["leaf"][f"{leaf.function} ({leaf.file})"] += count
    return tables


def hot_lines(stacks: list[tuple[list[Frame], int]], sources: SourceLines) -> dict[str, Counter[str]]:
    """Per layer: the leaf line, and the `aql_mcp` line nearest the leaf that led to it."""
    found: dict[str, Counter[str]] = {}
    for frames, count in stacks:
        if not frames:
            continue
        aql = [f for f in frames if is_aql(f)]
        via = f" via `{aql[-1].function}` ({aql[-1].file}:{aql[-1].line})" if aql and aql[-1] is not frames[-1] else ""
        leaf = frames[-1]
        key = f"`{leaf.function}` ({leaf.file}:{leaf.line}){via}"
        found.setdefault(layer_of(frames, sources), Counter())[key] += count
    return found


def detail(stacks: list[tuple[list[Frame], int]], sources: SourceLines, total: int, layers: list[str]) -> list[str]:
    lines = []
    hot = hot_lines(stacks, sources)
    for layer in layers:
        lines += [f"**{layer}**", ""]
        lines += [f"- {100 * n / total:.1f} % {key}" for key, n in hot.get(layer, Counter()).most_common(6)]
        lines.append("")
    return lines


def table(counter: Counter[str], total: int, header: str, *, limit: int | None = None) -> list[str]:
    lines = [f"| {header} | samples | % |", "|---|---:|---:|"]
    for name, count in counter.most_common(limit):
        lines.append(f"| {name} | {count} | {100 * count / total:.1f} |")
    return lines


GIL_NOTE = (
    "Recorded with `GIL=1` (py-spy `--gil`): only the samples of the thread holding the GIL are kept. "
    "Without it, a thread waiting for the GIL counts as running on the line after its last system call "
    "(the event loop's log write while the exporter's thread encodes spans); with it, time spent in "
    "system calls made without the GIL is not counted, and the parts' shares are of the rest."
)


@dataclass(frozen=True)
class Profiled:
    """One target's profile: its raw stacks and the wrk row measured while they were recorded."""

    target: str
    raw: Path
    row: dict[str, Any]


def render(profiles: list[Profiled], versions: dict[str, str], source: Path) -> list[str]:
    sources = SourceLines(source)
    first = profiles[0].row
    lines = [
        "# Where aql-mcp's time goes under load",
        "",
        f"Generated by `bench/profile.sh`: {versions.get('py-spy', 'py-spy')} sampling the service at "
        f"{first['rate']} Hz for {first['duration']} s of wrk at c={first['conc']} per target (`tools/call echo`, the "
        "`bench/service.yaml` configuration of `make bench`: production mode, every middleware, info logs, traces "
        "exported at the default sampler to the stand-in collector), server on CPU 0, wrk and py-spy on CPU 1. "
        "py-spy runs `--nonblocking`: it reads the stacks without stopping the process, so a sample is never "
        "delayed to the end of a system call (a stopping sampler charges each `getpid`, `send` and `write` far "
        "more than it costs). Then, for as long again, py-spy draws the flame graph kept in `bench/profiles/` "
        "(or where `FLAMES` says) "
        "(open the SVG in a browser). Raw stacks stay in the run's results folder (gitignored).",
        *(["", GIL_NOTE] if first.get("gil") else []),
        "",
        "## Per call, by part of the path",
        "",
        "Each sample goes to the part of the frame nearest the leaf that has one (bench/stacks.py, "
        "`CATEGORY_FILES`), and the parts' shares of the samples are turned into microseconds of the server CPU "
        "per call measured during the same run. `uvicorn` includes the event loop, httptools, Starlette and the "
        "connection limits (server/); `trace` includes the exporter's thread, which encodes and sends the spans.",
        "",
    ]
    for profile in profiles:
        row = profile.row
        stacks = working(parse(profile.raw))
        lines += [
            f"### {profile.target}",
            "",
            f"{row['calls_per_s']:.0f} calls/s, p50 {row['p50_ms']:.1f} ms, p99 {row['p99_ms']:.1f} ms, "
            f"{row['server_cpu_us_per_call']:.0f} µs of server CPU per call, {row['bad']} bad responses; "
            f"spans per call: {row.get('spans_per_call') or 0:.2f}; other processes used "
            f"{row['others_on_server_cpu']:.0%} of the server CPU.",
            "",
            *per_call(stacks, sources, row["server_cpu_us_per_call"]),
            "",
        ]
    for profile in profiles:
        lines += _detail(profile, sources)
    return [
        *lines,
        "## Versions",
        "",
        "| component | version |",
        "|---|---|",
        *(f"| {name} | {version} |" for name, version in versions.items()),
        "",
    ]


def _detail(profile: Profiled, sources: SourceLines) -> list[str]:
    stacks = working(parse(profile.raw))
    total = sum(count for _, count in stacks) or 1
    tables = tally(stacks, sources)
    top_layers = [layer for layer, _ in tables["layer"].most_common(8)]
    return [
        f"## {profile.target} in detail",
        "",
        "By layer: each sample is charged to the frame nearest the leaf that belongs to a layer (an `aql_mcp` file,",
        "or a library: structlog → logging, jwt → auth, ...); standard-library frames go to their caller.",
        "",
        *table(tables["layer"], total, "layer"),
        "",
        "Hottest leaf functions (self time):",
        "",
        *table(tables["leaf"], total, "function (file)", limit=15),
        "",
        "Where in each of the biggest layers: the leaf line and, when it is not in `aql_mcp`, the `aql_mcp` line",
        "that led there.",
        "",
        *detail(stacks, sources, total, top_layers),
    ]


def write_profile(profiles: list[Profiled], output: Path, *, versions: dict[str, str], source: Path) -> None:
    notes = ""
    if output.exists() and NOTES_MARKER in output.read_text():
        notes = output.read_text().split(NOTES_MARKER, 1)[1]
    output.write_text("\n".join([*render(profiles, versions, source), NOTES_MARKER]) + (notes or "\n"))


def main(argv: list[str]) -> None:
    """Rewrite PROFILE.md from a profile run's directory (profile.json, raw stacks, source snapshot)."""
    run = Path(argv[0])
    output = Path(argv[2]) if len(argv) > 2 and argv[1] == "--output" else Path(__file__).parent / "PROFILE.md"
    saved = json.loads((run / "profile.json").read_text())
    profiles = [Profiled(p["target"], Path(p["raw"]), p["row"]) for p in saved["profiles"]]
    write_profile(profiles, output, versions=saved["versions"], source=run / "src")


if __name__ == "__main__":
    main(sys.argv[1:])
