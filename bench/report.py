"""RESULTS.md from one or more run directories: medians over repetitions, the targets, the noise.

Each run directory holds `results.jsonl` (one row per measured run or session phase),
`versions.json` and `commands.json`, as `driver.py run` writes them.
"""

from __future__ import annotations

import json
import shlex
import statistics
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from stacks import NOTES_MARKER
from targets import TARGETS

SERVICE = "aql-mcp"
MODERN_SERVICE = "aql-mcp-modern"
REFERENCE = "sdk-stateless-json"
MODERN_REFERENCE = "sdk-modern-json"
CEILING = "ceiling"
UNTRACED = {SERVICE: "aql-mcp-untraced", MODERN_SERVICE: "aql-mcp-modern-untraced"}
# The goals' columns: the production stack as the issue measures it, then sampling, then no exporter.
STACKS = (
    ("traced (production stack)", SERVICE, MODERN_SERVICE),
    ("traced, 1 % of traces sampled", "aql-mcp-sampled", "aql-mcp-modern-sampled"),
    ("without a trace exporter", UNTRACED[SERVICE], UNTRACED[MODERN_SERVICE]),
)
ORDER = tuple(t.name for t in TARGETS)
MODERN = frozenset(t.name for t in TARGETS if t.modern)
GOAL_SPEEDUP = 4.0
GOAL_MODERN_SPEEDUP = 2.0
GOAL_CEILING_SHARE = 0.4
GOAL_P99_MS = 25.0
GOAL_KB_PER_SESSION = 4.0
GOAL_HANDSHAKE_CPU_MS = 1.0
LOAD_COLUMNS = (
    "| target | c | calls/s | (min-max) | p50 ms | p99 ms | (min-max) | server CPU µs/call | server CPU busy | bad "
    "| others on server CPU |",
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
)
SESSION_COLUMNS = (
    "| target | handshake p50 ms | p99 ms | server CPU ms/handshake | RSS idle MiB | RSS with the sessions open MiB "
    "| KiB per open idle session |",
    "|---|---:|---:|---:|---:|---:|---:|",
)


def load_rows(runs: list[Path]) -> list[dict[str, Any]]:
    rows = []
    for run in runs:
        for line in (run / "results.jsonl").read_text().splitlines():
            rows.append({**json.loads(line), "run": run.name})
    return rows


def median(rows: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(values) if values else None


def grouped(rows: list[dict[str, Any]], phase: str) -> dict[tuple[str, int], list[dict[str, Any]]]:
    groups: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        if row["phase"] == phase:
            groups[(row["target"], row.get("conc", 0))].append(row)
    return dict(sorted(groups.items(), key=lambda item: (_rank(item[0][0]), item[0][1])))


def _rank(target: str) -> int:
    return ORDER.index(target) if target in ORDER else len(ORDER)


def load_table(rows: list[dict[str, Any]]) -> list[str]:
    lines = list(LOAD_COLUMNS)
    for (target, conc), group in grouped(rows, "load").items():
        m = {
            k: median(group, k)
            for k in (
                "calls_per_s",
                "p50_ms",
                "p99_ms",
                "server_cpu_us_per_call",
                "server_cpu_share",
                "others_on_server_cpu",
            )
        }
        bad = sum(r["bad"] + r["err_connect"] + r["err_read"] + r["err_write"] + r["err_timeout"] for r in group)
        lines.append(
            f"| {target} | {conc} | {m['calls_per_s']:.0f} | {_spread(group, 'calls_per_s', '.0f')} | "
            f"{m['p50_ms']:.2f} | {m['p99_ms']:.1f} | {_spread(group, 'p99_ms', '.1f')} | "
            f"{m['server_cpu_us_per_call']:.0f} | {m['server_cpu_share']:.0%} | {bad} | "
            f"{m['others_on_server_cpu']:.0%} |"
        )
    return lines


def _spread(rows: list[dict[str, Any]], key: str, spec: str) -> str:
    values = [r[key] for r in rows]
    return f"{min(values):{spec}}-{max(values):{spec}}" if len(values) > 1 else ""


def session_table(rows: list[dict[str, Any]]) -> list[str]:
    lines = list(SESSION_COLUMNS)
    for (target, _), group in grouped(rows, "sessions").items():
        per_session = median(group, "kib_per_session")
        rss_before, rss_after = (
            (median(group, "rss_before_kib") or 0) / 1024,
            (median(group, "rss_after_kib") or 0) / 1024,
        )
        lines.append(
            f"| {target} | {median(group, 'handshake_p50_ms'):.2f} | {median(group, 'handshake_p99_ms'):.2f} | "
            f"{median(group, 'server_cpu_ms_per_handshake'):.2f} | {rss_before:.1f} | {rss_after:.1f} | "
            f"{'n/a (stateless)' if per_session is None else f'**{per_session:.1f}**'} |"
        )
    without = sorted({r["target"] for r in rows if r["target"] in MODERN}, key=_rank)
    if without:
        lines += [
            "",
            f"No row for {', '.join(without)}: MCP 2026-07-28 has no handshake and no session, so there is nothing "
            "to time here or to keep in memory; each of their calls above carried what a handshake negotiates.",
        ]
    return lines


def goals(rows: list[dict[str, Any]]) -> list[str]:
    """Issue 25's goals at c=64, for the traced rows (the production stack) and, beside them, the same
    service sampling one trace in a hundred and without a trace exporter (`STACKS`, those the run
    measured); a ratio goal is met only when every repetition meets it."""
    measured = {r["target"] for r in rows}
    stacks = [stack for stack in STACKS if stack[1] in measured or stack[2] in measured]
    if not stacks:
        return ["No aql-mcp target was measured in this run: no goal to check."]
    lines = [
        f"| measure at c=64 | {' | '.join(f'{title} | met' for title, _, _ in stacks)} | goal |",
        f"|---|{'---|---|' * len(stacks)}---|",
    ]
    for name, goal, check in _checks():
        cells: list[str] = []
        for _, legacy, modern in stacks:
            shown, met = check(rows, legacy, modern)
            cells += [shown, "n/a" if met is None else "yes" if met else "**no**"]
        lines.append(f"| {name} | {' | '.join(cells)} | {goal} |")
    sessions = grouped(rows, "sessions")
    lines += ["", "| measure (2025-11-25 sessions) | target | measured | goal | met |", "|---|---|---:|---|---|"]
    for target in (legacy for _, legacy, _ in stacks):
        group = sessions.get((target, 0), [])
        if not group:
            continue
        per_session = median(group, "kib_per_session")
        handshake = median(group, "server_cpu_ms_per_handshake")
        lines.append(_line("memory per open idle session", target, per_session, " KiB", "≤ 4 KB", GOAL_KB_PER_SESSION))
        lines.append(_line("server CPU per handshake", target, handshake, " ms", "< 1 ms", GOAL_HANDSHAKE_CPU_MS))
    return lines


def _line(name: str, target: str, value: float | None, unit: str, goal: str, limit: float) -> str:
    shown = "n/a" if value is None else f"{value:.2f}{unit}"
    met = "n/a" if value is None else "yes" if value <= limit else "**no**"
    return f"| {name} | {target} | {shown} | {goal} | {met} |"


Check = Any


def _checks() -> list[tuple[str, str, Check]]:
    return [
        (
            "2026-07-28 `tools/call`, x the SDK's own 2026-07-28 path, each repetition",
            f"≥ {GOAL_MODERN_SPEEDUP:g}x",
            lambda rows, _legacy, modern: _per_rep(rows, modern, MODERN_REFERENCE, GOAL_MODERN_SPEEDUP),
        ),
        (
            "2025-11-25 `tools/call` in a session, x the SDK's stateless JSON, each repetition",
            f"≥ {GOAL_SPEEDUP:g}x",
            lambda rows, legacy, _modern: _per_rep(rows, legacy, REFERENCE, GOAL_SPEEDUP),
        ),
        (
            "2026-07-28 `tools/call`, x bare Starlette (the ceiling)",
            f"≥ {GOAL_CEILING_SHARE:g}x",
            lambda rows, _legacy, modern: _ratio(rows, modern, CEILING, GOAL_CEILING_SHARE),
        ),
        ("server CPU per call, 2026-07-28 / 2025-11-25", "≤ 1", _cpu_share),
        ("p99 latency, worst repetition of both eras", f"≤ {GOAL_P99_MS:g} ms", _worst_p99),
        ("bad answers, both eras", "0", _bad),
        ("spans exported per call (collector count)", "2 when every trace is sampled", _spans),
    ]


def _at64(rows: list[dict[str, Any]], target: str) -> list[dict[str, Any]]:
    return [r for r in rows if r["phase"] == "load" and r["target"] == target and r.get("conc") == 64]


def _per_rep(rows: list[dict[str, Any]], ours: str, theirs: str, goal: float) -> tuple[str, bool | None]:
    by_rep = {(r["run"], r["rep"]): r["calls_per_s"] for r in _at64(rows, theirs)}
    found = [
        r["calls_per_s"] / by_rep[(r["run"], r["rep"])] for r in _at64(rows, ours) if (r["run"], r["rep"]) in by_rep
    ]
    if not found:
        return "n/a", None
    return ", ".join(f"{x:.2f}x" for x in found), all(x >= goal for x in found)


def _ratio(rows: list[dict[str, Any]], ours: str, theirs: str, goal: float) -> tuple[str, bool | None]:
    a, b = median(_at64(rows, ours), "calls_per_s"), median(_at64(rows, theirs), "calls_per_s")
    if not a or not b:
        return "n/a", None
    return f"{a / b:.2f}x", a / b >= goal


def _cpu_share(rows: list[dict[str, Any]], legacy: str, modern: str) -> tuple[str, bool | None]:
    m, old = (
        median(_at64(rows, modern), "server_cpu_us_per_call"),
        median(_at64(rows, legacy), "server_cpu_us_per_call"),
    )
    if not m or not old:
        return "n/a", None
    return f"{m:.0f} / {old:.0f} µs = {m / old:.2f}", m <= old


def _worst_p99(rows: list[dict[str, Any]], legacy: str, modern: str) -> tuple[str, bool | None]:
    found = [r["p99_ms"] for r in _at64(rows, legacy) + _at64(rows, modern)]
    if not found:
        return "n/a", None
    return f"{max(found):.1f} ms", max(found) <= GOAL_P99_MS


def _bad(rows: list[dict[str, Any]], legacy: str, modern: str) -> tuple[str, bool | None]:
    group = _at64(rows, legacy) + _at64(rows, modern)
    if not group:
        return "n/a", None
    bad = sum(r["bad"] + r["err_connect"] + r["err_read"] + r["err_write"] + r["err_timeout"] for r in group)
    return str(bad), bad == 0


def _spans(rows: list[dict[str, Any]], legacy: str, modern: str) -> tuple[str, bool | None]:
    found = [r["spans_per_call"] for r in _at64(rows, legacy) + _at64(rows, modern) if r.get("spans_per_call")]
    if not found:
        return "none exported", None
    return f"{min(found):.2f}-{max(found):.2f}", None


def ratios(rows: list[dict[str, Any]], service: str = SERVICE) -> list[str]:
    """`service` against every other target at each concurrency: throughput and CPU per call."""
    load = grouped(rows, "load")
    lines = ["| c | vs | calls/s ratio | CPU per call ratio (theirs / ours) |", "|---:|---|---:|---:|"]
    for (target, conc), group in load.items():
        ours = load.get((service, conc))
        if target == service or not ours:
            continue
        rps = median(ours, "calls_per_s") / median(group, "calls_per_s")  # type: ignore[operator]
        cpu = median(group, "server_cpu_us_per_call") / median(ours, "server_cpu_us_per_call")  # type: ignore[operator]
        lines.append(f"| {conc} | {target} | {rps:.2f}x | {cpu:.2f}x |")
    return lines


def modern_ratios(rows: list[dict[str, Any]]) -> list[str]:
    """aql-mcp-modern against the others, when the run measured it."""
    if not any(r["target"] == MODERN_SERVICE and r["phase"] == "load" for r in rows):
        return []
    return [f"{MODERN_SERVICE} against the others:", "", *ratios(rows, MODERN_SERVICE), ""]


def versions_table(runs: list[Path]) -> list[str]:
    found = json.loads((runs[-1] / "versions.json").read_text())
    return ["| component | version |", "|---|---|", *(f"| {k} | {v} |" for k, v in found.items())]


def commands_block(runs: list[Path]) -> list[str]:
    found = json.loads((runs[-1] / "commands.json").read_text())
    lines = ["```sh"]
    for target, argv in found.items():
        lines += [f"# {target}: server, then the measured wrk run at c=64", _shell(argv["server"]), _shell(argv["wrk"])]
    return [*lines, "```"]


def _shell(argv: list[str]) -> str:
    root = str(Path(__file__).resolve().parent.parent) + "/"
    # Double quotes keep `$TOKEN` expandable; a JSON body (the modern rows' wrk argument) needs single quotes.
    quoted = [shlex.quote(a) if '"' in a else f'"{a}"' if " " in a else a for a in argv]
    return " ".join(quoted).replace(root, "")


def noise(rows: list[dict[str, Any]], options: dict[str, Any]) -> list[str]:
    load = [r for r in rows if r["phase"] == "load"]
    reruns = sum(r.get("attempts", 1) - 1 for r in load)
    gave_up = sum(1 for r in rows if (r.get("quiet_wait_s") or 0) < 0)
    worst = max(load, key=lambda r: r["others_on_server_cpu"], default=None)
    lines = [
        f"- Before each measured run the driver waits (at most {options['quiet_wait']:g} s) for one second in which "
        f"other processes use at most {options['quiet']:.0%} of either CPU, and reruns (at most {options['retries']} "
        f"time(s)) a run in which they took more than {options['disturbed']:.0%} of the server CPU.",
        f"- {len(load)} measured wrk runs; {reruns} rerun(s); {gave_up} run(s) or session phase(s) started without "
        "a quiet second.",
        f"- Niceness of the driver, servers and wrk: {options.get('nice', 0)} "
        "(`NICE=-10` puts them ahead of other work).",
    ]
    if worst is not None:
        lines.append(
            f"- Most disturbed kept run: {worst['target']} c={worst['conc']} (rep {worst['rep']}), others used "
            f"{worst['others_on_server_cpu']:.0%} of the server CPU and {worst['others_on_load_cpu']:.0%} of the "
            "load CPU."
        )
    wrk_max = max((r["wrk_cpu_share"] for r in load), default=0.0)
    lines.append(f"- wrk used at most {wrk_max:.0%} of the load CPU: the load generator was not the bottleneck.")
    return lines


def service_log(rows: list[dict[str, Any]]) -> list[str]:
    services = {target for _, *targets in STACKS for target in targets}
    lines = []
    for row in sorted(rows, key=lambda r: _rank(r["target"])):
        log = row.get("log")
        if row["target"] not in services or not log:
            continue
        statuses = ", ".join(f"{count} x {status}" for status, count in sorted(log["http_status"].items()))
        lines.append(
            f"- {row['target']}, {row['phase']} phase, rep {row['rep']}: `http_request` lines {statuses or 'none'}; "
            f"{log['problem_lines']} lines at warning or above."
        )
        lines += [f"  - `{p[:300]}`" for p in log["problems"][:5]]
    for row in rows:
        if row["target"] not in services and row.get("log", {}).get("problem_lines"):
            lines.append(
                f"- {row['target']} ({row['phase']}, rep {row['rep']}) logged: `{row['log']['problems'][0][:300]}`"
            )
    return lines


def finished(runs: list[Path]) -> str:
    latest = max((run / "results.jsonl").stat().st_mtime for run in runs)
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(latest))


def invocation(options: dict[str, Any]) -> str:
    settings = {
        "NICE": (options.get("nice", 0), 0),
        "REPS": (options["reps"], 1),
        "DURATION": (options["duration"], 10),
        "CONC": (options.get("conc", "1,16,64"), "1,16,64"),
    }
    changed = [f"{name}={value}" for name, (value, default) in settings.items() if value != default]
    targets = options.get("targets", list(ORDER))
    if targets != list(ORDER):
        changed.insert(0, f"TARGETS={','.join(targets)}")
    return " ".join([*changed, "make bench"])


def render(runs: list[Path]) -> list[str]:
    rows = load_rows(runs)
    reps = max(r["rep"] for r in rows)
    options = json.loads((runs[-1] / "options.json").read_text())
    return [
        "# Benchmark results",
        "",
        f"Written by `make bench` (`bench/run.sh`) from the run that ended {finished(runs)}: "
        f"{', '.join(f'`bench/results/{r.name}`' for r in runs)} ({reps} repetition(s) of every target; values are "
        "medians over repetitions). How it measures: `bench/README.md`.",
        "",
        "## Against the targets",
        "",
        *goals(rows),
        "",
        "## tools/call: throughput, latency, server CPU",
        "",
        f"Closed loop, one wrk thread, {options['warmup']} s warm-up then {options['duration']} s measured per "
        "concurrency; server CPU = the server "
        'process\'s utime+stime over the measured window / calls. "bad" counts responses that failed the check '
        '(HTTP 200, JSON or SSE framing, echoed text, no `"isError":true`) plus socket errors and timeouts. '
        "The `-modern` rows send stateless MCP 2026-07-28 requests (no initialize, no session; version, client "
        "info and capabilities in every request's `_meta`, mirrored headers); their answers must also be one JSON "
        'body with `"resultType":"complete"`, to an id sent and not yet answered, naming no session.',
        "",
        *load_table(rows),
        "",
        "aql-mcp against the others:",
        "",
        *ratios(rows),
        "",
        *modern_ratios(rows),
        "## Handshakes and memory",
        "",
        f"{options['sessions']:,} sequential initialize + notifications/initialized on one keep-alive connection "
        "(stdlib client on "
        "CPU 1), sessions left open; RSS from /proc/<pid>/status before and 1 s after; server CPU over the loop.",
        "",
        *session_table(rows),
        "",
        "## Noise",
        "",
        *noise(rows, options),
        "",
        "## Service log",
        "",
        *service_log(rows),
        "",
        "## Versions",
        "",
        *versions_table(runs),
        "",
        "## Commands",
        "",
        f"This run: `{invocation(options)}` (`make bench` runs `bench/run.sh`). Per target, as run "
        "(`$TOKEN`: an ES256 JWT from the stand-in IdP of `bench/idp.py`, whose JWKS URL, issuer and audience "
        "reach aql-mcp as `AQL_MCP_AUTH__*`; "
        "aql-mcp with `PYTHONPATH=<run>/src`, the snapshot of src/ the run served):",
        "",
        *commands_block(runs),
        "",
    ]


def write_report(runs: list[Path], output: Path) -> None:
    notes = ""
    if output.exists() and NOTES_MARKER in output.read_text():
        notes = output.read_text().split(NOTES_MARKER, 1)[1]
    output.write_text("\n".join([*render(runs), NOTES_MARKER]) + (notes or "\n"))
    print(f"[bench] wrote {output}")
