"""The measuring side of the attack benchmark (`bench/attacks.py`): probes that time another tenant's
calls and `/health` while an attack runs, the connect flood, and the rows of bench/ATTACKS.md."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from attack_calls import GUARD_SECONDS
from stacks import NOTES_MARKER  # text below it in ATTACKS.md is kept when it is regenerated

# Each probe is sent every PROBE_INTERVAL_SECONDS whether or not the previous one was answered (an
# open loop, as a kubelet or a user does): a frozen replica shows as many slow answers, not as one
# (a closed loop would hide the freeze, "coordinated omission"). 10 calls/s of the probing tenant
# stay under the default per-caller rate (`limits.rate_per_second`, 50).
PROBE_INTERVAL_SECONDS = 0.1
# N3: a probe is a kubelet's: a new connection each time, failed after 1 s (its default timeoutSeconds).
FLOOD_PROBE_SECONDS = 1.0


@dataclass
class Probe:
    """One timed call, repeated: latencies of every try (a failed or timed-out one counts with its time)."""

    name: str
    call: Callable[[], Awaitable[str]]  # "ok", or what went wrong (an error code, `http 503`)
    latencies: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)

    @property
    def failures(self) -> int:
        return sum(self.errors.values())

    def p(self, q: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000 if ordered else float("nan")

    @property
    def samples(self) -> str:
        failed = f"{self.failures} failed" + (f": {outcomes(self.errors)}" if self.errors else "")
        return f"{len(self.latencies)} ({failed})"

    @property
    def ok_share(self) -> float:
        return 1 - self.failures / len(self.latencies) if self.latencies else float("nan")


async def probe_rounds(
    probes: list[Probe], seconds: float, limit: float = GUARD_SECONDS, until: asyncio.Event | None = None
) -> None:
    """Each probe sent every PROBE_INTERVAL_SECONDS for `seconds` (or until `until` is set), then every
    call awaited (each bounded by `limit` seconds: one that fails or times out counts with its time)."""

    async def timed(probe: Probe) -> None:
        begin = time.perf_counter()
        try:
            outcome = await asyncio.wait_for(probe.call(), limit)
        except TimeoutError:
            outcome = "timeout"
        except httpx.HTTPError as error:
            outcome = type(error).__name__
        probe.latencies.append(time.perf_counter() - begin)
        if outcome != "ok":
            probe.errors[outcome] += 1

    sent: list[asyncio.Future[None]] = []
    start = time.monotonic()
    ticks = 0
    while time.monotonic() - start < seconds and not (until is not None and until.is_set()):
        sent += [asyncio.ensure_future(timed(probe)) for probe in probes]
        ticks += 1
        await asyncio.sleep(max(0.0, start + ticks * PROBE_INTERVAL_SECONDS - time.monotonic()))
    await asyncio.gather(*sent)


def health_probe(client: httpx.AsyncClient, url: str) -> Callable[[], Awaitable[str]]:
    async def call() -> str:
        status = (await client.get(url)).status_code
        return "ok" if status == 200 else f"http {status}"

    return call


async def under_attack(attack: Awaitable[Any], probes: list[Probe], seconds: float, ramp: float = 1.0) -> Any:
    """Run `attack` (bounded by its caller) and, after `ramp` seconds, the probes for `seconds`."""
    running = asyncio.ensure_future(attack)
    try:
        await asyncio.sleep(ramp)
        await probe_rounds(probes, seconds)
        return await running
    finally:
        running.cancel()


async def bounded(seconds: float, workers: list[Awaitable[None]]) -> None:
    """Run the attack's workers until `seconds` have passed: in-flight requests are abandoned."""
    try:
        async with asyncio.timeout(seconds):
            await asyncio.gather(*workers)
    except TimeoutError:
        pass


# --- the connect flood (its own process, on the load CPU) ----------------------------------------


async def flood_process(script: Path, port: int, seconds: float, rate: float) -> dict[str, float]:
    """The flood in a second process pinned to CPU 1 (the probes stay in this one): its counts."""
    command = ["taskset", "-c", "1", sys.executable, str(script), "--flood", str(port), str(seconds), str(rate)]
    process = await asyncio.create_subprocess_exec(*command, stdout=asyncio.subprocess.PIPE)
    out, _ = await asyncio.wait_for(process.communicate(), seconds + 30)
    return dict(json.loads(out.decode().strip().splitlines()[-1]))


# --- the table -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Goal:
    text: str
    check: Callable[[float], bool] | None = None


LATENCY = Goal("< 50 ms", lambda v: v < 50)
NO_GOAL = Goal("-")


@dataclass
class Row:
    finding: str
    engine: str
    attack: str
    measured: str
    idle: float | None
    value: float | None
    unit: str
    goal: Goal
    note: str = ""

    @property
    def met(self) -> str:
        if self.goal.check is None:
            return ""
        if self.value is None or self.value != self.value:
            return "n/a"
        return "yes" if self.goal.check(self.value) else "**no**"


def fmt(value: float | None, unit: str) -> str:
    if value is None or value != value:
        return "n/a"
    if unit == "%":
        return f"{value:.1f} %"
    if unit == "ms":
        return f"{value:,.0f} ms" if value >= 100 else f"{value:.1f} ms"
    if unit == "MB":
        return f"{value:.1f} MB"
    return f"{value:g}{(' ' + unit) if unit else ''}"


def write(rows: list[Row], output: Path, header: list[str]) -> None:
    lines = [
        *header,
        "",
        "| finding | engine | attack (what the attacker sent / got) | measured | samples | idle | under attack | goal "
        "| met |",
        "|---|---|---|---|---|---:|---:|---|---|",
    ]
    for r in rows:
        idle = fmt(r.idle, r.unit) if r.idle is not None else ""
        lines.append(
            f"| {r.finding} | {r.engine} | {r.attack} | {r.measured} | {r.note} | {idle} | {fmt(r.value, r.unit)} | "
            f"{r.goal.text} | {r.met} |"
        )
    notes = "\n"
    if output.exists() and NOTES_MARKER in output.read_text(encoding="utf-8"):
        notes = output.read_text(encoding="utf-8").split(NOTES_MARKER, 1)[1]
    output.write_text("\n".join([*lines, "", NOTES_MARKER]) + notes, encoding="utf-8")


def outcomes(counts: Counter[str]) -> str:
    return ", ".join(f"{what}: {n}" for what, n in counts.most_common()) or "nothing answered"


def cpu_count() -> int:
    return os.cpu_count() or 0
