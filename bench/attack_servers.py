"""The servers and callers of the attack benchmark (`bench/attacks.py`): a fresh `aql-mcp serve --dev`
per row on either engine, the tenants' sessions, and the probes another tenant runs meanwhile."""

from __future__ import annotations

import secrets
import subprocess
from collections.abc import AsyncIterator
from contextlib import ExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
from attack_calls import GUARD_SECONDS, Tenant
from attack_rows import Probe, probe_rounds, under_attack
from tests.support.server import ServerProcess, start_server

from aql_mcp.store.factory import SQLITE_FILE
from store import fresh_database

CONCURRENCY = 16  # the attacker's calls in flight: the default per-caller cap (`limits.max_concurrent_calls`)
IDLE_SECONDS = 2.0
SERVER_ENV = {
    "AQL_MCP_LOGGING__LEVEL": "warning",
    "AQL_MCP_RECORDS__MAX_RECORDS": "1000000",
    "AQL_MCP_RECORDS__MAX_BYTES": str(1 << 30),
    # The probing tenant's open loop keeps more than 16 calls in flight while a replica is frozen; the
    # attacker sends at most CONCURRENCY at once by construction, so this does not let it send more.
    "AQL_MCP_LIMITS__MAX_CONCURRENT_CALLS": "256",
}
SMALL = "small"
START_ATTEMPTS = 2


@asynccontextmanager
async def served(
    root: Path, label: str, pg: str | None, env: dict[str, str] | None = None
) -> AsyncIterator[tuple[ServerProcess, str]]:
    """A fresh `aql-mcp serve --dev` on SQLite (`pg` None) or a new PostgreSQL database; yields it
    and where to seed records (the SQLite file or the database URL)."""
    environ = {**SERVER_ENV, **(env or {})}
    with ExitStack() as stack:
        for attempt in range(1, START_ATTEMPTS + 1):
            state = root / f"{label}-{'postgres' if pg else 'sqlite'}-{secrets.token_hex(2)}"
            state.mkdir(parents=True)
            if pg is not None:
                environ["AQL_MCP_STORE__URL"] = await fresh_database(pg)
            try:
                server = stack.enter_context(start_server(state, env=environ, plugins=()))
                break
            except RuntimeError as failed:
                # A refused configuration fails again; anything else (a port another process took
                # between free_port and the bind, a slow start on the shared machine) is tried again.
                if attempt == START_ATTEMPTS or "configuration refused" in str(failed):
                    raise
                print(f"attacks: the server did not start, trying again: {str(failed)[:300]}", flush=True)
        pin(server.process.pid)
        yield server, environ.get("AQL_MCP_STORE__URL") or str(state / SQLITE_FILE)


def pin(pid: int) -> None:
    """Every thread of the server on CPU 0 (the store's threads too), as bench/stall.py does."""
    subprocess.run(["taskset", "-a", "-cp", "0", str(pid)], capture_output=True, check=True)  # noqa: S603, S607


async def tenant(server: ServerProcess, subject: str) -> Tenant:
    return await Tenant(server.base, server.token(subject=subject, ttl=3600)).open()


async def small_collection(server: ServerProcess, subject: str) -> tuple[Tenant, list[str]]:
    """The probing tenant with a 3-record collection of its own."""
    other = await tenant(server, subject)
    await other.must("create_collection", {"collection": SMALL})
    ids = [str((await other.must("create_record", {"collection": SMALL, "data": {"n": i}}))["id"]) for i in range(3)]
    return other, ids


def health_client(base: str) -> httpx.AsyncClient:
    limits = httpx.Limits(max_connections=256, max_keepalive_connections=256)
    return httpx.AsyncClient(base_url=base, timeout=GUARD_SECONDS, limits=limits)


def call_probe(name: str, other: Tenant, operation: str, params: Any) -> Probe:
    async def call() -> str:
        return (await other.aql(operation, params() if callable(params) else params)).outcome

    return Probe(name, call)


async def idle_and_attacked(probes: list[Probe], attack: Any, seconds: float) -> tuple[list[Probe], Any]:
    """The probes alone for IDLE_SECONDS, then again under `attack`: (idle probes, attack's result)."""
    idle = [Probe(p.name, p.call) for p in probes]
    await probe_rounds(idle, IDLE_SECONDS)
    return idle, await under_attack(attack, probes, seconds)
