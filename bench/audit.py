"""The audit trail's cost (issue 24): echo, a write and a read through MCP 2026-07-28 with the trail
off, on, and on with read auditing, measured in the same run.

    .venv/bin/python bench/audit.py                         # writes bench/AUDIT.md (about 4 minutes)
    .venv/bin/python bench/audit.py --engines sqlite --seconds 1 --output /tmp/audit.md   # a quick look

Three `aql-mcp serve --dev` run at once, pinned to CPU 0, one per setting (`audit.trail: false`;
the default; `audit.reads: true`), each on a store of its own (SQLite, or a database of its own on
one throwaway PostgreSQL pinned to CPU 1). For each operation and concurrency the three are measured
one after the other, so a row's settings share the same minute of this machine's noise:

- `echo`: `tools/call` of the echo plugin, which makes no audit record: the baseline;
- `create_record`: `mcp_aql_create`, a write whose reply waits for its record (docs/audit.md, "Writing");
- `get_record`: `mcp_aql_read`, a read, recorded (queued, never waited for) only with `audit.reads`.

Every call is a stateless 2026-07-28 request (no handshake, no session), with the headers a modern
client mirrors (`Mcp-Method`, `Mcp-Name`, `Mcp-Param-Operation`), from a Python asyncio client on
CPU 1 (`store.py`'s load generator: compare within the table, not with RESULTS.md's wrk numbers).
Reported: p50/p99 latency, calls/s, the server's CPU per call, and the audit records each server
holds at the end (none with the trail off). Nothing here asserts a number.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import shutil
import sqlite3
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from client import MODERN_META, MODERN_VERSION  # noqa: E402
from stacks import NOTES_MARKER  # noqa: E402  (text below it in AUDIT.md is kept when regenerated)
from store import Server, fresh_database, pct, postgres, timed, token  # noqa: E402

ECHO = "aql_mcp.testing.echo:plugin"
# The settings compared, in the order each row measures them.
SETTINGS = {
    "trail off": {"AQL_MCP_AUDIT__TRAIL": "false"},
    "trail on": {},
    "trail on, reads": {"AQL_MCP_AUDIT__READS": "true"},
}
OPERATIONS = ("echo", "create_record", "get_record")
SEEDED = 200


@dataclass
class Target:
    """One server with its setting, and the records its `get_record` row reads."""

    name: str
    server: Server
    bearer: str
    database: str | None
    ids: list[str] = field(default_factory=list)
    http: httpx.AsyncClient = field(default_factory=lambda: httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=64)))

    async def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """A stateless 2026-07-28 `tools/call`; fails on anything but a successful result."""
        headers = {
            "authorization": f"Bearer {self.bearer}",
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
            "mcp-protocol-version": MODERN_VERSION,
            "mcp-method": "tools/call",
            "mcp-name": tool,
        }
        if isinstance(operation := arguments.get("operation"), str):
            headers["mcp-param-operation"] = operation
        message = {
            "jsonrpc": "2.0",
            "id": secrets.randbelow(10**9),
            "method": "tools/call",
            "params": {"name": tool, "arguments": arguments, "_meta": MODERN_META},
        }
        answer = await self.http.post(f"{self.server.base}/mcp", content=orjson.dumps(message), headers=headers)
        body = answer.json() if answer.status_code == 200 else {}
        result = body.get("result") or {}
        if "error" in body or result.get("isError") or result.get("resultType") != "complete":
            raise RuntimeError(f"{self.name}: call failed: {answer.status_code} {answer.text[:300]}")
        return dict(result)

    async def aql(self, tool: str, operation: str, **params: Any) -> dict[str, Any]:
        envelope = (await self.call(tool, {"operation": operation, "params": params}))["structuredContent"]
        if not envelope.get("success"):
            raise RuntimeError(f"{self.name}: {operation} refused: {envelope}")
        return dict(envelope)

    async def run(self, operation: str, i: int) -> None:
        if operation == "echo":
            await self.call("echo", {"text": "bench-audit"})
        elif operation == "create_record":
            await self.aql("mcp_aql_create", "create_record", collection="bench", data={"n": i, "title": f"note {i}"})
        else:
            await self.aql("mcp_aql_read", "get_record", collection="bench", id=self.ids[i % len(self.ids)])

    async def records(self) -> int:
        """The audit records the server's store holds."""
        if self.database is not None:
            connection = await asyncpg.connect(self.database)
            try:
                return int(await connection.fetchval("SELECT count(*) FROM audit_records"))
            finally:
                await connection.close()
        with sqlite3.connect(self.server.state / "aql-mcp.sqlite3") as db:
            return int(db.execute("SELECT count(*) FROM audit_records").fetchone()[0])


async def start(engine: str, root: Path, pg_server: str | None, stack: ExitStack) -> list[Target]:
    """One server per setting, each with a collection of SEEDED records made through the API."""
    targets = []
    for index, (name, env) in enumerate(SETTINGS.items()):
        state = root / f"{engine}-{index}"
        environ = {**env, "AQL_MCP_SERVER__PLUGINS": json.dumps([ECHO])}
        database = await fresh_database(pg_server) if engine == "postgres" and pg_server else None
        if database is not None:
            environ["AQL_MCP_STORE__URL"] = database
        server = Server(state, environ, cpu=0)
        stack.callback(server.stop)
        target = Target(name, server, token(state), database)
        await target.aql("mcp_aql_create", "create_collection", collection="bench")
        for n in range(SEEDED):
            target.ids.append((await target.aql("mcp_aql_create", "create_record", collection="bench", data={"n": n}))["data"]["id"])
        targets.append(target)
    return targets


async def measure(engine: str, root: Path, pg_server: str | None, options: argparse.Namespace) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    with ExitStack() as stack:
        targets = await start(engine, root, pg_server, stack)
        try:
            for operation in OPERATIONS:
                for concurrency in (int(c) for c in options.conc.split(",")):
                    for target in targets:
                        rows.append(await measure_one(engine, target, operation, concurrency, options.seconds))
            kept = {target.name: await target.records() for target in targets}
        finally:
            for target in targets:
                await target.http.aclose()
    for row in rows:
        row["audit_records"] = kept[row["setting"]]
    return rows


async def measure_one(engine: str, target: Target, operation: str, concurrency: int, seconds: float) -> dict[str, Any]:
    await timed(lambda i: target.run(operation, i), min(1.0, seconds / 2), concurrency)  # warm-up
    cpu = target.server.cpu()
    latencies, calls = await timed(lambda i: target.run(operation, i), seconds, concurrency)
    used = target.server.cpu() - cpu
    row = {
        "engine": engine, "operation": operation, "c": concurrency, "setting": target.name,
        "p50": pct(latencies, 0.5), "p99": pct(latencies, 0.99), "calls_s": calls / seconds, "cpu_us": used / calls * 1e6,
    }
    print(json.dumps(row), flush=True)
    return row


def write(rows: list[dict[str, Any]], output: Path, options: argparse.Namespace) -> None:
    lines = [
        "# Audit trail benchmark",
        "",
        f"`{' '.join(['.venv/bin/python', 'bench/audit.py', *sys.argv[1:]])}` on {time.strftime('%Y-%m-%d')}, "
        f"{os.cpu_count()} CPUs; servers on CPU 0, the Python load generator (and PostgreSQL) on CPU 1; "
        f"{options.seconds:g} s per row. Stateless MCP 2026-07-28 calls; p50/p99 in ms; server CPU per call "
        "(`bench/audit.py` docstring). `echo` makes no audit record; `create_record` waits for its record; "
        "`get_record` is recorded only with `audit.reads`. \"records\" is what the server's trail held at the end.",
        "",
        "| engine | operation | c | setting | p50 ms | p99 ms | calls/s | server CPU µs/call | records |",
        "|---|---|---:|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['engine']} | {r['operation']} | {r['c']} | {r['setting']} | {r['p50']:.2f} | {r['p99']:.2f} | "
            f"{r['calls_s']:,.0f} | {r['cpu_us']:,.0f} | {r['audit_records']:,} |"
        )
    notes = "\n"
    if output.exists() and NOTES_MARKER in output.read_text(encoding="utf-8"):
        notes = output.read_text(encoding="utf-8").split(NOTES_MARKER, 1)[1]
    output.write_text("\n".join([*lines, "", NOTES_MARKER]) + notes, encoding="utf-8")


async def main(options: argparse.Namespace) -> None:
    os.sched_setaffinity(0, {1})
    root = Path(tempfile.mkdtemp(prefix="aql-audit-bench-"))
    engines = options.engines.split(",")
    rows: list[dict[str, Any]] = []
    with ExitStack() as stack:
        pg_server = stack.enter_context(postgres(root)) if "postgres" in engines else None
        for engine in engines:
            rows += await measure(engine, root, pg_server, options)
    write(rows, Path(options.output), options)
    shutil.rmtree(root, ignore_errors=True)
    print(f"audit bench: wrote {options.output}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engines", default="sqlite,postgres")
    parser.add_argument("--conc", default="1,16", help="concurrencies, comma-separated")
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--output", default=str(ROOT / "bench" / "AUDIT.md"))
    asyncio.run(main(parser.parse_args()))
