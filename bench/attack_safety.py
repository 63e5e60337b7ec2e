"""N1 of the attack benchmark (`bench/attacks.py`): 16 concurrent `record_execution_step` with a
4,000-character hint, with the default patterns or adversarial ones, while tenant B's `get_record`
and `/health` are probed."""

from __future__ import annotations

import asyncio
import secrets
from collections import Counter
from pathlib import Path
from typing import Any

from attack_calls import Tenant, execute_agent, fit_patterns, record_step
from attack_rows import LATENCY, Probe, Row, bounded, health_probe, outcomes
from attack_servers import (
    CONCURRENCY,
    SMALL,
    call_probe,
    health_client,
    idle_and_attacked,
    served,
    small_collection,
    tenant,
)
from tests.support.server import ServerProcess

# A held principal is left for a new one at most this often in a row (each costs a token and a session).
MAX_IDENTITIES = 200
STEPS_PER_RUN = 40  # below the default maxAutonomousSteps (50): the run is completed and another started


class Identities:
    """The attacker's principals: a held run (paused or blocked) holds every run of its principal, so
    the attacker moves to a new one, as the issue's "complete one, start another" does with runs."""

    def __init__(self, server: ServerProcess) -> None:
        self.server = server
        self.generation = 0
        self.tenants: dict[int, Tenant] = {}
        self.lock = asyncio.Lock()

    async def current(self) -> tuple[int, Tenant]:
        async with self.lock:
            generation = self.generation
            if generation not in self.tenants:
                self.tenants[generation] = await tenant(self.server, f"attacker-{generation}")
            return generation, self.tenants[generation]

    def held(self, generation: int) -> None:
        if generation < MAX_IDENTITIES - 1:
            self.generation = max(self.generation, generation + 1)

    async def close(self) -> None:
        for caller in self.tenants.values():
            await caller.close()


async def safety_attack(identities: Identities, fit: Any, seconds: float, counts: Counter[str]) -> None:
    async def worker(k: int) -> None:
        name = f"agent-{k}"
        while True:
            generation, caller = await identities.current()
            started = await caller.aql(
                "execute_agent", execute_agent(name, fit.count, fit.length) if fit else execute_agent(name)
            )
            counts[f"execute_agent {started.outcome}"] += 1
            if not started.ok:
                if started.status != 429:
                    identities.held(generation)
                await asyncio.sleep(0.1)
                continue
            run = str(started.data["execution_id"])
            for _ in range(STEPS_PER_RUN):
                step = await caller.aql("record_execution_step", record_step(name, run))
                verdict = ("continue" if step.data.get("continue") else "held") if step.ok else step.outcome
                counts[f"steps {verdict}"] += 1
                if verdict == "held":
                    identities.held(generation)
                if step.status == 429:  # the per-caller rate or cap: the attacker slows down, as told
                    await asyncio.sleep(0.1)
                elif verdict != "continue":
                    break
            await caller.aql("complete_execution", {"element_name": name, "execution_id": run})

    await bounded(seconds, [worker(k) for k in range(CONCURRENCY)])


async def n1(root: Path, engine: str, pg: str | None, adversarial: bool, seconds: float) -> list[Row]:
    async with served(root, "n1", pg) as (server, _):
        other, ids = await small_collection(server, "tenant-b")
        health = health_client(server.base)
        probes = [
            call_probe(
                "tenant B get_record p99", other, "get_record", lambda: {"collection": SMALL, "id": secrets.choice(ids)}
            ),
            Probe("/health p99", health_probe(health, "/health")),
        ]
        identities = Identities(server)
        fit, label = None, "default patterns"
        if adversarial:
            _, first = await identities.current()
            fit, run = await fit_patterns(first, "agent-fit")
            await first.aql("complete_execution", {"element_name": "agent-fit", "execution_id": run})
            label = f"{fit.label} (accepted on try {fit.tries})"
        counts: Counter[str] = Counter()
        idle, _ = await idle_and_attacked(probes, safety_attack(identities, fit, seconds + 1, counts), seconds)
        await identities.close()
        await other.close()
        await health.aclose()
    attack = (
        f"16 concurrent steps, 4,000-char hint, {label}: {outcomes(counts)}; {identities.generation + 1} principal(s)"
    )
    return [
        Row("N1 safety loop", engine, attack, p.name, i.p(0.99), p.p(0.99), "ms", LATENCY, p.samples)
        for i, p in zip(idle, probes, strict=True)
    ]
