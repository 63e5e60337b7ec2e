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


def render(raw: Path, row: dict[str, Any], versions: dict[str, str], source: Path) -> list[str]:
    stacks = parse(raw)
    total = sum(count for _, count in stacks)
    sources = SourceLines(source)
    tables = tally(stacks, sources)
    top_layers = [layer for layer, _ in tables["layer"].most_common(8)]
    expected = row["rate"] * row["duration"]
    return [
        "# Where aql-mcp's time goes under load",
        "",
        f"Generated by `bench/profile.sh`: {versions.get('py-spy', 'py-spy')} sampling the service at "
        f"{row['rate']} Hz for {row['duration']} s of wrk at c={row['conc']} (`tools/call echo`, stateful, the "
        "`bench/service.yaml` configuration of `make bench`), server on CPU 0, wrk and py-spy on CPU 1. "
        f"Raw stacks: `{raw}` (gitignored).",
        "",
        f"During the profile: {row['calls_per_s']:.0f} calls/s, "
        f"p50 {row['p50_ms']:.1f} ms, p99 {row['p99_ms']:.1f} ms, "
        f"{row['server_cpu_us_per_call']:.0f} µs of server CPU per call, {row['bad']} bad responses; the server used "
        f"{row['server_cpu_share']:.0%} of its CPU and other processes {row['others_on_server_cpu']:.0%}. py-spy "
        "pauses the process for each sample, so throughput here is below `make bench`'s.",
        f"{total} samples with the server on CPU (idle samples are not recorded): "
        f"{total / expected:.0%} of the {expected} a fully busy process would give.",
        "",
        "## By layer",
        "",
        "Each sample is charged to the frame nearest the leaf that belongs to a layer: an `aql_mcp` file, or a",
        "library (structlog → logging, jsonschema/referencing → protocol/tools, jwt → auth, ...). Standard-library",
        "frames are charged to their caller; orjson (C) shows as the `aql_mcp` line that calls it.",
        "",
        *table(tables["layer"], total, "layer"),
        "",
        "## By the `aql_mcp` file nearest the leaf (libraries charged to the file that called them)",
        "",
        "Samples with no `aql_mcp` frame are grouped by the library nearest the leaf.",
        "",
        *table(tables["owner"], total, "file or library"),
        "",
        "## Inclusive: samples with the file anywhere on the stack",
        "",
        "The middleware nest, so each includes everything inside it; the drop from one to the next is that",
        "layer's own cost plus anything it does after the inner app returns.",
        "",
        *table(tables["inclusive"], total, "aql_mcp file"),
        "",
        "## Hottest leaf functions (self time)",
        "",
        *table(tables["leaf"], total, "function (file)", limit=25),
        "",
        "## Where in each of the biggest layers",
        "",
        "The leaf line (what was running) and, when it is not in `aql_mcp`, the `aql_mcp` line that led there.",
        "",
        *detail(stacks, sources, total, top_layers),
        "## Versions",
        "",
        "| component | version |",
        "|---|---|",
        *(f"| {name} | {version} |" for name, version in versions.items()),
        "",
    ]


def write_profile(raw: Path, row: dict[str, Any], output: Path, *, versions: dict[str, str], source: Path) -> None:
    notes = ""
    if output.exists() and NOTES_MARKER in output.read_text():
        notes = output.read_text().split(NOTES_MARKER, 1)[1]
    output.write_text("\n".join([*render(raw, row, versions, source), NOTES_MARKER]) + (notes or "\n"))


def main(argv: list[str]) -> None:
    """Rewrite PROFILE.md from a profile run's directory (raw stacks, run row, source snapshot)."""
    run = Path(argv[0])
    output = Path(argv[2]) if len(argv) > 2 and argv[1] == "--output" else Path(__file__).parent / "PROFILE.md"
    saved = json.loads((run / "profile.json").read_text())
    write_profile(run / "profile.raw.txt", saved["row"], output, versions=saved["versions"], source=run / "src")


if __name__ == "__main__":
    main(sys.argv[1:])
