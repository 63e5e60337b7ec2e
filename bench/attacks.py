"""The attack benchmark (issue 27): the service under each attack of the v0.2.0 adversarial run, with
another tenant's calls and `/health` timed meanwhile, on SQLite and PostgreSQL where storage is involved.

    .venv/bin/python bench/attacks.py                           # writes bench/ATTACKS.md (about 4 minutes)
    .venv/bin/python bench/attacks.py --seconds 5 --only N1,N3 --engines sqlite --output /tmp/attacks.md

- N1 safety loop: 16 concurrent `record_execution_step` with a 4,000-character hint of one-letter
  words, with the default patterns and with 100 `deny` + 100 `requiresApproval` adversarial globs
  given to `execute_agent` (the largest set the service accepts: `attack_calls.fit_patterns`).
- N2 listings: 16 concurrent sorted listings and searches no index serves over 50,000 records.
- N3 connect flood: 5,000 bare connects per second to the main port; `/health` probed as a kubelet
  does (a new connection, 1 s timeout) on the main port, then on the probe listener (`probes.port`).
- N4 exports: 3 tenants x 4 concurrent exports of about 16 MB; the server's RSS read from /proc.

Every server is `aql-mcp serve --dev` (the development issuer mints each tenant's token: the
attacker and the probing tenant are ordinary `mcp` callers), started fresh per row with the
per-caller rate at its default (50 calls/s) and the cap on calls in flight raised for the
probing tenant's open loop (SERVER_ENV), pinned with all its threads to CPU 0; this process, the flood
process and PostgreSQL run on CPU 1. Nothing here asserts a number; it measures and writes a table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from attack_calls import Answer, Tenant, flood, heavy_listing  # noqa: E402
from attack_rows import (  # noqa: E402
    FLOOD_PROBE_SECONDS,
    LATENCY,
    NO_GOAL,
    Goal,
    Probe,
    Row,
    bounded,
    flood_process,
    health_probe,
    outcomes,
    probe_rounds,
    write,
)
from attack_safety import n1  # noqa: E402
from attack_servers import (  # noqa: E402
    CONCURRENCY,
    IDLE_SECONDS,
    SMALL,
    call_probe,
    health_client,
    idle_and_attacked,
    served,
    small_collection,
    tenant,
)
from procfs import rss_kib  # noqa: E402
from tests.support.server import free_port  # noqa: E402

from store import postgres, seed  # noqa: E402

LISTED_RECORDS = 50_000
FLOOD_RATE = 5_000.0
EXPORTERS, EXPORTS_EACH = 3, 4
EXPORT_RECORDS = 15_000  # x ~1,050 bytes of NDJSON: about 16.3 MB per export, under executions.max_export_bytes
EXPORT_WAIT_SECONDS = 90.0


# --- N2: listings ----------------------------------------------------------------------------------


def note(index: int) -> dict[str, Any]:
    return {"status": ("open", "done", "hold")[index % 3], "n": index, "title": f"note {index}"}


async def n2(root: Path, engine: str, pg: str | None, seconds: float) -> list[Row]:
    async with served(root, "n2", pg) as (server, where):
        await seed(engine, where, "notes", LISTED_RECORDS, tenant="tenant-a", make=note)
        lister = await tenant(server, "tenant-a")
        other, _ = await small_collection(server, "tenant-b")
        health = health_client(server.base)
        listing = call_probe("tenant B list_records", other, "list_records", {"collection": SMALL, "first": 20})
        probes = [listing, Probe("/health p99", health_probe(health, "/health"))]
        counts: Counter[str] = Counter()

        async def worker(k: int) -> None:
            while True:
                answer = await lister.aql(*heavy_listing(k, LISTED_RECORDS))
                counts[f"listings {answer.outcome}"] += 1
                if not answer.ok:
                    await asyncio.sleep(0.05)

        attack = bounded(seconds + 1, [worker(k) for k in range(CONCURRENCY)])
        idle, _ = await idle_and_attacked(probes, attack, seconds)
        for caller in (lister, other):
            await caller.close()
        await health.aclose()
    what = f"16 concurrent sorted listings/searches over {LISTED_RECORDS:,} records: {outcomes(counts)}"
    i_list, i_health = idle
    return [
        Row(
            "N2 listings",
            engine,
            what,
            "tenant B list_records p50",
            i_list.p(0.5),
            listing.p(0.5),
            "ms",
            NO_GOAL,
            listing.samples,
        ),
        Row(
            "N2 listings",
            engine,
            what,
            "tenant B list_records p99",
            i_list.p(0.99),
            listing.p(0.99),
            "ms",
            LATENCY,
            listing.samples,
        ),
        Row(
            "N2 listings",
            engine,
            what,
            "/health p99",
            i_health.p(0.99),
            probes[1].p(0.99),
            "ms",
            LATENCY,
            probes[1].samples,
        ),
    ]


# --- N3: connect flood -----------------------------------------------------------------------------


async def n3(root: Path, probe_listener: bool, seconds: float) -> Row:
    goal = Goal("≥ 99 %", lambda v: v >= 99) if probe_listener else Goal("≥ 90 %", lambda v: v >= 90)
    measured = "/health 200 share, " + ("probe listener" if probe_listener else "main port")
    port = free_port()
    env = {"AQL_MCP_PROBES__PORT": str(port)} if probe_listener else {}
    try:
        async with served(root, "n3", None, env) as (server, _):
            base = f"http://127.0.0.1:{port}" if probe_listener else server.base
            if probe_listener and not await answers(base):
                return no_listener(measured, goal, "ignores")
            limits = httpx.Limits(max_keepalive_connections=0)
            async with httpx.AsyncClient(base_url=base, timeout=FLOOD_PROBE_SECONDS, limits=limits) as client:
                probes = [Probe(measured, health_probe(client, "/health"))]
                idle = [Probe(measured, probes[0].call)]
                await probe_rounds(idle, IDLE_SECONDS, FLOOD_PROBE_SECONDS)
                flooding = asyncio.ensure_future(flood_process(Path(__file__), server.port, seconds + 1, FLOOD_RATE))
                await asyncio.sleep(1.0)
                await probe_rounds(probes, seconds, FLOOD_PROBE_SECONDS)
                made = await flooding
    except RuntimeError as refused:
        if not probe_listener or "PROBES" not in str(refused):
            raise
        print(f"attacks: the service did not start with probes.port: {str(refused)[:300]}", flush=True)
        return no_listener(measured, goal, "refuses")
    rate = made["connects"] / made["seconds"]
    attack = f"{made['connects']:,.0f} bare connects in {made['seconds']:.0f} s ({rate:,.0f}/s), each held {1.5:g} s"
    share = probes[0].ok_share * 100
    return Row(
        "N3 connect flood",
        "sqlite",
        attack,
        measured,
        idle[0].ok_share * 100,
        share,
        "%",
        goal,
        probes[0].samples,
    )


def no_listener(measured: str, goal: Goal, how: str) -> Row:
    attack = f"not run: n/a (no probe listener: the service {how} probes.port)"
    return Row("N3 connect flood", "sqlite", attack, measured, None, None, "%", goal)


async def answers(base: str) -> bool:
    try:
        async with httpx.AsyncClient(timeout=2) as client:
            return (await client.get(f"{base}/health")).status_code == 200
    except httpx.HTTPError:
        return False


# --- N4: exports -----------------------------------------------------------------------------------


def padded(index: int) -> dict[str, Any]:
    return {"n": index, "title": f"row {index}", "body": "x" * 900}


async def n4(root: Path, engine: str, pg: str | None, seconds: float) -> list[Row]:
    async with served(root, "n4", pg) as (server, where):
        exporters = []
        for k in range(EXPORTERS):
            await seed(engine, where, "big", EXPORT_RECORDS, tenant=f"exporter-{k}", make=padded)
            exporters.append(await tenant(server, f"exporter-{k}"))
        other = await tenant(server, "tenant-d")
        await other.must("create_collection", {"collection": SMALL})
        creating = call_probe(
            "tenant D create_record p99", other, "create_record", {"collection": SMALL, "data": {"n": 1}}
        )
        idle = [Probe(creating.name, creating.call)]
        await probe_rounds(idle, IDLE_SECONDS)
        base_kib = peak_kib = rss_kib(server.process.pid)
        done = asyncio.Event()

        async def sample() -> None:
            nonlocal peak_kib
            while not done.is_set():
                peak_kib = max(peak_kib, rss_kib(server.process.pid))
                await asyncio.sleep(0.02)

        sampler = asyncio.ensure_future(sample())
        probing = asyncio.ensure_future(probe_rounds([creating], 2 * EXPORT_WAIT_SECONDS, until=done))
        deadline = time.monotonic() + EXPORT_WAIT_SECONDS
        started = await asyncio.gather(*(start_export(c, deadline) for c in exporters for _ in range(EXPORTS_EACH)))
        owners = [caller for caller in exporters for _ in range(EXPORTS_EACH)]
        runs = [(owner, str(a.data["execution_id"])) for owner, (a, _) in zip(owners, started, strict=True) if a.ok]
        finals = await wait_exports(runs, deadline)
        done.set()
        await asyncio.gather(sampler, probing)
        for caller in (*exporters, other):
            await caller.close()
    total = EXPORTERS * EXPORTS_EACH
    states = Counter(final_state(f) for f in finals) + Counter(f"refused {a.outcome}" for a, _ in started if not a.ok)
    retried = sum(refusals for _, refusals in started)
    sizes = [f["result"]["bytes"] for f in finals if f.get("status") == "completed" and f.get("result")]
    mb = (sum(sizes) / len(sizes) / 1e6) if sizes else 0.0
    attack = f"{EXPORTERS} tenants x {EXPORTS_EACH} exports of {mb:.1f} MB: {outcomes(states)}"
    attack += f" ({retried} starts refused with 429 and retried)" if retried else ""
    growth = (peak_kib - base_kib) / 1024 / total
    failed = total - states.get("completed", 0)
    return [
        Row(
            "N4 exports",
            engine,
            attack,
            "RSS growth per concurrent export",
            None,
            growth,
            "MB",
            Goal("≤ 8 MB", lambda v: v <= 8),
            f"RSS {base_kib / 1024:.0f} → {peak_kib / 1024:.0f} MB",
        ),
        Row(
            "N4 exports",
            engine,
            attack,
            f"exports not completed (of {total})",
            None,
            failed,
            "",
            Goal("0", lambda v: v == 0),
        ),
        Row(
            "N4 exports",
            engine,
            attack,
            creating.name,
            idle[0].p(0.99),
            creating.p(0.99),
            "ms",
            NO_GOAL,
            creating.samples,
        ),
    ]


def final_state(execution: dict[str, Any]) -> str:
    """`completed`, or the state with the error code a failed export reports (`failed INTERNAL_ERROR`)."""
    error = execution.get("error")
    code = error.get("code") if isinstance(error, dict) else error
    return f"{execution.get('status', 'unknown')} {code}" if code else str(execution.get("status", "unknown"))


async def start_export(caller: Tenant, deadline: float) -> tuple[Answer, int]:
    """`execute_export`, sent again every half second while the service refuses it for now (429 or
    RATE_LIMIT_*: a cap on concurrent exports), as a client honouring Retry-After would."""
    refusals = 0
    while True:
        answer = await caller.aql("execute_export", {"collection": "big"})
        busy = answer.status == 429 or answer.outcome.startswith("RATE_LIMIT")
        if not busy or time.monotonic() > deadline:
            return answer, refusals
        refusals += 1
        await asyncio.sleep(0.5)


async def wait_exports(runs: list[tuple[Tenant, str]], deadline: float) -> list[dict[str, Any]]:
    """Each export's final state (or its state at `deadline`)."""
    finals: dict[str, dict[str, Any]] = {}
    while len(finals) < len(runs) and time.monotonic() < deadline:
        await asyncio.sleep(0.5)
        for owner, run in runs:
            if run not in finals:
                answer = await owner.aql("get_execution", {"execution_id": run})
                if answer.ok and answer.data.get("status") in ("completed", "failed", "cancelled"):
                    finals[run] = answer.data
    for owner, run in runs:
        if run not in finals:
            finals[run] = (await owner.aql("get_execution", {"execution_id": run})).data or {"status": "unanswered"}
    return list(finals.values())


# --- the run ---------------------------------------------------------------------------------------


async def measure(options: argparse.Namespace) -> list[Row]:
    os.sched_setaffinity(0, {1})
    root = Path(tempfile.mkdtemp(prefix="aql-attacks-bench-"))
    only, engines, seconds = options.only.split(","), options.engines.split(","), options.seconds
    rows: list[Row] = []
    try:
        with postgres(root) as pg_server:
            for engine in engines:
                pg = pg_server if engine == "postgres" else None
                if "N1" in only:
                    rows += await n1(root, engine, pg, adversarial=False, seconds=seconds)
                    rows += await n1(root, engine, pg, adversarial=True, seconds=seconds)
                if "N2" in only:
                    rows += await n2(root, engine, pg, seconds)
                if "N4" in only:
                    rows += await n4(root, engine, pg, seconds)
                print("\n".join(json.dumps(vars(r), default=str) for r in rows[-8:]), flush=True)
        if "N3" in only:
            rows.append(await n3(root, probe_listener=False, seconds=seconds))
            rows.append(await n3(root, probe_listener=True, seconds=seconds))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    order = {f: i for i, f in enumerate(("N1", "N2", "N3", "N4"))}
    return sorted(rows, key=lambda r: order[r.finding[:2]])


def header(options: argparse.Namespace, load: tuple[float, float]) -> list[str]:
    revision = subprocess.run(
        ["git", "describe", "--always", "--dirty"],  # noqa: S607 (git from PATH, as the driver's versions.json)
        capture_output=True,
        text=True,
        cwd=ROOT,
    ).stdout.strip()
    command = " ".join([".venv/bin/python", "bench/attacks.py", *sys.argv[1:]])
    return [
        "# Attack benchmark",
        "",
        f"`{command}` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, revision `{revision}`, "
        f"{os.cpu_count()} CPUs: each row a fresh `aql-mcp serve --dev` on CPU 0 (`bench/attacks.py` docstring), "
        f"the attacker, the probes and PostgreSQL on CPU 1; {options.seconds:g} s of attack per row "
        f'after a 1 s ramp, {IDLE_SECONDS:g} s of the same probes with no attack first ("idle"). '
        "The probing tenant's call and `/health` are each sent 10 times a second whether or not the previous "
        "one was answered (an open loop); a call that fails or times out (15 s; 1 s for the flood's probes) "
        "counts with its time, so a p99 of about 15,000 ms means more than 1 % were not answered within 15 s. "
        "Goals from issue 27; `bench/README.md` says what each row sends. The machine is shared: "
        f"compare rows of one run, not runs (1-minute load average {load[0]:.1f} at the start, {load[1]:.1f} "
        "at the end).",
    ]


if __name__ == "__main__":
    if sys.argv[1:2] == ["--flood"]:
        print(json.dumps(flood(int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]))), flush=True)
        sys.exit(0)
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="seconds of attack per row")
    parser.add_argument("--engines", default="sqlite,postgres")
    parser.add_argument("--only", default="N1,N2,N3,N4")
    parser.add_argument("--output", default=str(ROOT / "bench" / "ATTACKS.md"))
    options = parser.parse_args()
    before = os.getloadavg()[0]
    measured = asyncio.run(measure(options))
    write(measured, Path(options.output), header(options, (before, os.getloadavg()[0])))
    print(f"attack bench: wrote {options.output}")
