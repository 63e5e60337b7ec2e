"""The store benchmark (issue 11): records operations on SQLite and PostgreSQL, the engine floor
beside them, a ping while filtered listings run, and echo on one and three PostgreSQL replicas;
and (issue 25) the record operations on collections with declared indexes at 1k, 100k and 1M
records: get, update, create and listings an indexed equality, range, or range and sort narrows,
with the time each index took to build.

    .venv/bin/python bench/store.py                    # writes bench/STORE.md (the 1M rows take a while)
    .venv/bin/python bench/store.py --sizes 1000 --seconds 2 --output /tmp/store.md
    .venv/bin/python bench/store.py --sizes "" --indexed-sizes 1000,10000 --seconds 1 --output /tmp/store.md
    .venv/bin/python bench/store.py --only stall --sizes 100000 --seconds 3 --output /tmp/stall.md

`--only stall` runs only the rows of a ping while 16 scanning listings run (at each of `--sizes`, on
each of `--engines`), with no indexed or echo rows; a partial run names its own `--output`.

Every server is `aql-mcp serve --dev` pinned to CPU 0 (`taskset`); PostgreSQL and the load generator
run on CPU 1
(a Python asyncio client over httpx: its absolute calls/s are lower than wrk's in RESULTS.md, the
comparisons within this table are what it is for). The floor is the same operation done directly
on the engine from Python, in process, through the store classes the service uses (no HTTP, MCP,
auth or router), so "service - floor" is what the service adds. Records are seeded straight into
the engine's tables (the same rows the records plugin writes), not through the API.
Nothing here asserts a number; it measures and writes a table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import secrets
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import asyncpg
import httpx
import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from procfs import cpu_seconds  # noqa: E402
from stacks import NOTES_MARKER  # noqa: E402  (text below it in STORE.md is kept when regenerated)

from aql_mcp.auth.dev_issuer import KEY_FILE, DevIssuer  # noqa: E402
from aql_mcp.plugins.records.indexes import index_of  # noqa: E402
from aql_mcp.plugins.records.listing import Condition, Listing  # noqa: E402
from aql_mcp.plugins.records.store import NewRecord, Quota  # noqa: E402
from aql_mcp.plugins.records.tables import TABLES as RECORDS  # noqa: E402
from aql_mcp.settings import Settings, StoreSettings  # noqa: E402
from aql_mcp.store.factory import open_store  # noqa: E402

ISSUER = "http://aql-mcp.bench"
AUDIENCE = f"{ISSUER}/mcp"
TENANT = "bench"
STATUSES = ("open", "done", "hold", "review", "draft", "late", "blocked", "new", "old", "spam")
QUOTA = Quota(max_records=10_000_000, max_bytes=10**12)
SERVER_ENV = {
    "AQL_MCP_LIMITS__RATE_PER_SECOND": "1000000",
    "AQL_MCP_LIMITS__RATE_BURST": "1000000",
    "AQL_MCP_LIMITS__MAX_CONCURRENT_CALLS": "1024",
    "AQL_MCP_RECORDS__MAX_RECORDS": "10000000",
    # The filtered and sorted listings over 100k records are what is measured, not refused.
    "AQL_MCP_STORE__LISTING_SCAN_ROWS": "10000000",
    "AQL_MCP_LOGGING__LEVEL": "warning",
    "AQL_MCP_AUTH__ISSUER": ISSUER,
    "AQL_MCP_AUTH__AUDIENCE": AUDIENCE,
    "AQL_MCP_SHUTDOWN__DRAIN_SECONDS": "0",
}


def data(index: int) -> dict[str, Any]:
    return {"status": STATUSES[index % len(STATUSES)], "n": index, "title": f"note {index}", "tags": ["a", "b"]}


# --- servers -------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Server:
    def __init__(self, state: Path, env: dict[str, str], cpu: int) -> None:
        self.port = free_port()
        self.state = state
        state.mkdir(parents=True, exist_ok=True)
        environ = {**os.environ, **SERVER_ENV, **env, "AQL_MCP_STORE__PATH": str(state)}
        command = ["taskset", "-c", str(cpu), sys.executable, "-m", "aql_mcp.main", "serve", "--dev", "--port", str(self.port)]
        self.log = (state / "server.log").open("wb")
        self.process = subprocess.Popen(command, env=environ, stdout=self.log, stderr=subprocess.STDOUT, cwd=ROOT)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.base}/ready", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"server did not start: {(state / 'server.log').read_text()[-2000:]}")

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def cpu(self) -> float:
        return cpu_seconds(self.process.pid)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=20)
        self.log.close()


def token(key_dir: Path) -> str:
    return DevIssuer(state_dir=key_dir, issuer=ISSUER, audience=AUDIENCE).mint(subject=TENANT, scopes=["mcp"], ttl=3600)


class Caller:
    """An MCP session on one or several replicas (round robin), with the calls the benchmark makes."""

    def __init__(self, servers: list[Server], bearer: str) -> None:
        self.urls = [f"{s.base}/mcp" for s in servers]
        self.headers = {
            "authorization": f"Bearer {bearer}",
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
        }
        self.http = httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=64))
        self.turn = 0

    async def open(self) -> None:
        init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}
        answer = await self.http.post(self.urls[0], json=rpc("initialize", init), headers=self.headers)
        self.headers["mcp-session-id"] = answer.headers["mcp-session-id"]
        self.headers["mcp-protocol-version"] = "2025-11-25"
        await self.http.post(self.urls[0], json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=self.headers)

    async def call(self, message: dict[str, Any]) -> dict[str, Any]:
        url = self.urls[self.turn % len(self.urls)]
        self.turn += 1
        answer = await self.http.post(url, content=orjson.dumps(message), headers=self.headers)
        body = answer.json()
        if answer.status_code != 200 or "error" in body or body.get("result", {}).get("isError"):
            raise RuntimeError(f"call failed: {answer.status_code} {answer.text[:300]}")
        return body

    async def aql(self, operation: str, **params: Any) -> dict[str, Any]:
        family = {"create": "mcp_aql_create", "update": "mcp_aql_update", "delete": "mcp_aql_delete"}.get(
            operation.split("_")[0], "mcp_aql_read"
        )
        body = await self.call(rpc("tools/call", {"name": family, "arguments": {"operation": operation, "params": params}}))
        return dict(body["result"]["structuredContent"])


def rpc(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": secrets.randbelow(10**9), "method": method, "params": params or {}}


# --- engines ---------------------------------------------------------------------------------


@contextmanager
def postgres(root: Path) -> Iterator[str]:
    directory = root / "pg"
    # PostgreSQL on the load generator's CPU, as if on a host of its own: its backends must not take
    # the service's CPU, or a ping's latency measures the database's scans instead of the service.
    start = ["taskset", "-c", "1", str(ROOT / "scripts/postgres.sh"), "start", str(directory)]
    url = subprocess.run(start, capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
    try:
        yield url
    finally:
        subprocess.run([str(ROOT / "scripts/postgres.sh"), "stop", str(directory)], capture_output=True)


async def fresh_database(server_url: str) -> str:
    name = "bench_" + secrets.token_hex(4)
    admin = await asyncpg.connect(server_url)
    await admin.execute(f'CREATE DATABASE "{name}"')
    await admin.close()
    return server_url.rsplit("/", 1)[0] + "/" + name


async def seed(
    engine: str, where: str, collection: str, count: int, tenant: str = TENANT, make: Callable[[int], dict[str, Any]] = data
) -> None:
    """`count` records `make(i)` of `tenant` in `collection`, written as the records plugin writes them, in bulk."""
    now = "2026-11-24T00:00:00.000Z"
    rows = [(f"rec_{index:020x}", orjson.dumps(make(index))) for index in range(count)]
    size = sum(len(body) for _, body in rows)
    if engine == "sqlite":
        db = sqlite3.connect(where)
        with db:
            db.execute("INSERT INTO record_collections (tenant, name, description, fields, created_at) VALUES (?, ?, '', NULL, ?)", (tenant, collection, now))
            db.executemany(
                "INSERT INTO records (tenant, collection, id, data, size, etag, created_at, updated_at, pos) VALUES (?, ?, ?, ?, ?, 'e', ?, ?, ?)",
                [(tenant, collection, rid, body, len(body), now, now, index + 1) for index, (rid, body) in enumerate(rows)],
            )
            db.execute("UPDATE record_collections SET next_pos = ?, record_count = ? WHERE tenant = ? AND name = ?", (count, count, tenant, collection))
            db.execute("INSERT INTO record_usage VALUES (?, ?, ?) ON CONFLICT (tenant) DO UPDATE SET records = records + excluded.records, bytes = bytes + excluded.bytes", (tenant, count, size))
        db.close()
        return
    connection = await asyncpg.connect(where)
    await connection.execute("INSERT INTO record_collections (tenant, name, description, fields, created_at) VALUES ($1, $2, '', NULL, $3)", tenant, collection, now)
    await connection.copy_records_to_table(
        "records",
        records=[(tenant, collection, index + 1, rid, body.decode(), len(body), "e", now, now) for index, (rid, body) in enumerate(rows)],
        columns=["tenant", "collection", "pos", "id", "data", "size", "etag", "created_at", "updated_at"],
    )
    await connection.execute("UPDATE record_collections SET next_pos = $3, record_count = $3 WHERE tenant = $1 AND name = $2", tenant, collection, count)
    await connection.execute("INSERT INTO record_usage VALUES ($1, $2, $3) ON CONFLICT (tenant) DO UPDATE SET records = record_usage.records + excluded.records, bytes = record_usage.bytes + excluded.bytes", tenant, count, size)
    await connection.execute("ANALYZE records")
    await connection.close()


# --- measuring -------------------------------------------------------------------------------


async def timed(operation: Callable[[int], Awaitable[Any]], seconds: float, concurrency: int = 1) -> tuple[list[float], int]:
    """Run `operation(i)` in `concurrency` loops for `seconds`: latencies (s) and how many ran."""
    latencies: list[float] = []
    stop = time.perf_counter() + seconds
    counter = iter(range(10**9))

    async def loop() -> None:
        while time.perf_counter() < stop:
            start = time.perf_counter()
            await operation(next(counter))
            latencies.append(time.perf_counter() - start)

    await asyncio.gather(*(loop() for _ in range(concurrency)))
    return latencies, len(latencies)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def operations(count: int, created: list[str]) -> dict[str, tuple[Callable[[Any, int], Awaitable[Any]], Callable[[Any, int], Awaitable[Any]]]]:
    """Each benchmarked operation twice: through the service (a `Caller`) and on the engine (a `Store`)."""

    def some_id(i: int) -> str:
        return f"rec_{random.randrange(count):020x}"

    def rare(i: int) -> str:
        return f"note {random.randrange(count)}"

    async def svc_create(c: Caller, i: int) -> None:
        created.append((await c.aql("create_record", collection="bench", data=data(count + i)))["data"]["id"])

    async def eng_create(s: Any, i: int) -> None:
        await s.records.create_record(TENANT, NewRecord("bench", f"rec_f{secrets.token_hex(9)}", data(count + i), "e", "now"), QUOTA, None)

    async def svc_update(c: Caller, i: int) -> None:
        await c.aql("update_record", collection="bench", id=some_id(i), input={"status": "done"})

    async def eng_update(s: Any, i: int) -> None:
        await s.records.update_record(TENANT, "bench", some_id(i), lambda d: {**d, "status": "done"}, if_match=None, etag="e2", now="now", quota=QUOTA)

    # create_record last: the listings above it see the collection at its seeded size.
    return {
        "get_record": (
            lambda c, i: c.aql("get_record", collection="bench", id=some_id(i)),
            lambda s, i: s.records.get_record(TENANT, "bench", some_id(i)),
        ),
        "update_record": (svc_update, eng_update),
        "list_records": (
            lambda c, i: c.aql("list_records", collection="bench", first=20),
            lambda s, i: s.records.list_records(TENANT, "bench", Listing(size=20)),
        ),
        "list, filter 1 in 10": (
            lambda c, i: c.aql("list_records", collection="bench", first=20, filter={"status": "open"}),
            lambda s, i: s.records.list_records(TENANT, "bench", Listing(size=20, conditions=(Condition(("status",), "eq", "open"),))),
        ),
        "list, filter 1 in N": (
            lambda c, i: c.aql("list_records", collection="bench", first=20, filter={"title": rare(i)}),
            lambda s, i: s.records.list_records(TENANT, "bench", Listing(size=20, conditions=(Condition(("title",), "eq", rare(i)),))),
        ),
        "list, filter + sort": (
            lambda c, i: c.aql("list_records", collection="bench", first=20, filter={"status": "open"}, sort={"field": "n", "order": "desc"}),
            lambda s, i: s.records.list_records(TENANT, "bench", Listing(size=20, conditions=(Condition(("status",), "eq", "open"),), sort=("n",), descending=True)),
        ),
        "create_record": (svc_create, eng_create),
    }


async def measure_operations(
    engine: str, count: int, state: Path, env: dict[str, str], server: Server, caller: Caller,
    measured: dict[str, tuple[Callable[[Any, int], Awaitable[Any]], Callable[[Any, int], Awaitable[Any]]]],
    seconds: float,
) -> list[dict[str, Any]]:
    """Each operation through the whole service, and on the engine alone (its floor), as one row."""
    rows = []
    settings = Settings(store=StoreSettings.model_validate({"path": state, "url": env.get("AQL_MCP_STORE__URL", "")}))
    floor = open_store(settings)
    # The records facet as the plugin binds it (the store has no `records` of its own since plugins own their tables).
    records = floor.tables(RECORDS)
    # The scan budget the service gets from SERVER_ENV (the floor's store is built without settings).
    records.scan_rows = int(SERVER_ENV["AQL_MCP_STORE__LISTING_SCAN_ROWS"])
    engine_side = SimpleNamespace(records=records)
    await floor.open()
    try:
        for name, (through_service, on_engine) in measured.items():
            await timed(lambda i: through_service(caller, i), 0.5)  # warm-up
            cpu = server.cpu()
            latencies, calls = await timed(lambda i: through_service(caller, i), seconds)
            used = server.cpu() - cpu
            base, _ = await timed(lambda i: on_engine(engine_side, i), seconds / 2)
            rows.append(
                {
                    "engine": engine, "records": count, "operation": name,
                    "p50": pct(latencies, 0.5), "p99": pct(latencies, 0.99), "calls_s": calls / seconds,
                    "cpu_us": used / calls * 1e6, "floor_p50": pct(base, 0.5),
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    finally:
        await floor.close()
    return rows


async def measure_records(
    engine: str, count: int, root: Path, pg_server: str | None, seconds: float, only_stall: bool = False
) -> list[dict[str, Any]]:
    state = root / f"{engine}-{count}"
    env: dict[str, str] = {}
    if engine == "postgres":
        assert pg_server is not None
        env["AQL_MCP_STORE__URL"] = await fresh_database(pg_server)
    server = Server(state, env, cpu=0)  # creates the schema
    target = env.get("AQL_MCP_STORE__URL") or str(state / "aql-mcp.sqlite3")
    await seed(engine, target, "bench", count)
    caller = Caller([server], token(state))
    await caller.open()
    try:
        rows = []
        if not only_stall:
            rows = await measure_operations(engine, count, state, env, server, caller, operations(count, []), seconds)
        rows.append(await ping_under_listings(engine, count, caller, seconds))
    finally:
        await caller.http.aclose()
        server.stop()
    return rows


INDEXES = ({"field": "n", "type": "number"}, {"field": "status", "type": "string"})


def indexed_operations(count: int, created: list[str]) -> dict[str, tuple[Callable[[Any, int], Awaitable[Any]], Callable[[Any, int], Awaitable[Any]]]]:
    """The operations of the indexed rows, through the service and on the engine (the collection
    declares `INDEXES`): an equality one record matches, a range of 20, a range sorted by its field."""
    base = operations(count, created)
    indexed = frozenset(index_of(i["field"], i["type"]) for i in INDEXES)  # type: ignore[arg-type]

    def listing(*conditions: Condition, sort: tuple[str, ...] | None = None) -> Listing:
        return Listing(size=20, conditions=conditions, sort=sort, indexes=indexed)

    def start(i: int) -> int:
        return random.randrange(max(1, count - 20))

    return {
        "get_record": base["get_record"],
        "update_record": base["update_record"],
        "list, indexed eq 1 in N": (
            lambda c, i: c.aql("list_records", collection="bench", first=20, filter={"n": start(i)}),
            lambda s, i: s.records.list_records(TENANT, "bench", listing(Condition(("n",), "eq", start(i)))),
        ),
        "list, indexed range of 20": (
            lambda c, i: c.aql("list_records", collection="bench", first=20, filter={"n": {"gte": (k := start(i)), "lt": k + 20}}),
            lambda s, i: s.records.list_records(
                TENANT, "bench", listing(Condition(("n",), "gte", (k := start(i))), Condition(("n",), "lt", k + 20))
            ),
        ),
        "list, indexed range + sort desc": (
            lambda c, i: c.aql("list_records", collection="bench", first=20, filter={"n": {"lt": start(i) + 20}}, sort={"field": "n", "order": "desc"}),
            lambda s, i: s.records.list_records(TENANT, "bench", replace(listing(Condition(("n",), "lt", start(i) + 20), sort=("n",)), descending=True)),
        ),
        "list, indexed eq 1 in 10": (
            lambda c, i: c.aql("list_records", collection="bench", first=20, filter={"status": "open"}),
            lambda s, i: s.records.list_records(TENANT, "bench", listing(Condition(("status",), "eq", "open"))),
        ),
        "create_record": base["create_record"],
    }


async def measure_indexed(engine: str, count: int, root: Path, pg_server: str | None, seconds: float) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The indexed rows at `count` records, and how long each index took to build through `create_index`
    (on a seeded collection: the build reads every record)."""
    state = root / f"{engine}-indexed-{count}"
    env: dict[str, str] = {}
    if engine == "postgres":
        assert pg_server is not None
        env["AQL_MCP_STORE__URL"] = await fresh_database(pg_server)
    server = Server(state, env, cpu=0)
    target = env.get("AQL_MCP_STORE__URL") or str(state / "aql-mcp.sqlite3")
    await seed(engine, target, "bench", count)
    caller = Caller([server], token(state))
    await caller.open()
    builds = []
    for index in INDEXES:
        began = time.perf_counter()
        building = asyncio.ensure_future(caller.aql("create_index", collection="bench", **index))
        writes = await writes_while(building, caller, count)
        answer = await building
        builds.append({"engine": engine, "records": count, "index": f"{index['field']} ({index['type']})",
                       "seconds": time.perf_counter() - began, "state": answer["data"]["state"], **writes})
        print(json.dumps(builds[-1]), flush=True)
    if engine == "postgres":
        analyzer = await asyncpg.connect(env["AQL_MCP_STORE__URL"])
        await analyzer.execute("ANALYZE records")
        await analyzer.close()
    try:
        rows = await measure_operations(engine, count, state, env, server, caller, indexed_operations(count, []), seconds)
    finally:
        await caller.http.aclose()
        server.stop()
    return rows, builds


async def writes_while(building: asyncio.Future[Any], caller: Caller, count: int) -> dict[str, Any]:
    """`create_record` calls one after another while an index builds: how many succeeded, how many
    failed (SQLite: a write waits for the build's write lock up to `store.lock_timeout_seconds`), and
    the longest one."""
    done, failed, longest = 0, 0, 0.0
    while not building.done():
        start = time.perf_counter()
        try:
            await caller.aql("create_record", collection="bench", data=data(count + done + failed))
            done += 1
        except RuntimeError:
            failed += 1
        longest = max(longest, time.perf_counter() - start)
    return {"writes": done, "failed_writes": failed, "longest_write_ms": longest * 1000}


async def ping_under_listings(engine: str, count: int, caller: Caller, seconds: float) -> dict[str, Any]:
    """A ping's latency while 16 listings that scan the whole collection run (a substring of the title,
    which no index serves on either engine, and a sort), sent by a second load process so the two
    loads do not queue behind each other in one client. The row says how many listings the load
    process had answered and refused by the end (a load that stopped would make the ping look fast)."""
    listings = subprocess.Popen(
        [sys.executable, __file__, "--listings", caller.urls[0], caller.headers["authorization"],
         caller.headers["mcp-session-id"], str(count)],
        env={**os.environ}, cwd=ROOT, stdout=subprocess.PIPE,
    )
    try:
        await asyncio.sleep(1.0)
        latencies, calls = await timed(lambda i: caller.call(rpc("ping")), seconds)
    finally:
        listings.terminate()
        output, _ = listings.communicate(timeout=30)
    load = json.loads(output.decode().strip().splitlines()[-1]) if output.strip() else {"answered": 0, "refused": 0}
    listed = f"{load['answered']} listings answered, {load['refused']} refused"
    row = {
        "engine": engine, "records": count, "operation": f"ping while 16 scanning listings run ({listed})",
        "p50": pct(latencies, 0.5), "p99": pct(latencies, 0.99), "calls_s": calls / seconds,
        "cpu_us": None, "floor_p50": None, **load,
    }
    print(json.dumps(row), flush=True)
    return row


async def run_listings(url: str, authorization: str, session: str, count: int) -> None:
    """The second load process of `ping_under_listings`: 16 listing loops until terminated (SIGTERM),
    then one JSON line of how many listings were answered and how many refused (a listing whose
    time ran out, waiting for a scan slot or scanning, is refused; the loop goes on)."""
    os.sched_setaffinity(0, {1})
    caller = Caller([], authorization.removeprefix("Bearer "))
    caller.urls = [url]
    caller.headers |= {"mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
    counts = {"answered": 0, "refused": 0}

    async def listing() -> None:
        while True:
            part = {"contains": f"te {random.randrange(count)}"}
            try:
                await caller.aql("list_records", collection="bench", first=20, filter={"title": part}, sort={"field": "n"})
                counts["answered"] += 1
            except RuntimeError:
                counts["refused"] += 1

    loops = asyncio.gather(*(listing() for _ in range(16)))
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, loops.cancel)
    with suppress(asyncio.CancelledError):
        await loops
    print(json.dumps(counts), flush=True)


async def measure_echo(pg_server: str, root: Path, replicas: int, seconds: float) -> dict[str, Any]:
    """Echo calls at c=16 over `replicas` replicas on one PostgreSQL (round robin), CPU per call."""
    url = await fresh_database(pg_server)
    key_dir = root / f"echo-key-{replicas}"
    key_dir.mkdir()
    DevIssuer(state_dir=key_dir, issuer=ISSUER, audience=AUDIENCE)
    servers = []
    for index in range(replicas):
        state = root / f"echo-{replicas}-{index}"
        state.mkdir()
        shutil.copy(key_dir / KEY_FILE, state / KEY_FILE)
        servers.append(Server(state, {"AQL_MCP_STORE__URL": url, "AQL_MCP_SERVER__PLUGINS": '["aql_mcp.testing.echo:plugin"]'}, cpu=0))
    caller = Caller(servers, token(key_dir))
    await caller.open()
    echo = rpc("tools/call", {"name": "echo", "arguments": {"text": "hello"}})
    try:
        await timed(lambda i: caller.call(echo), 1.0, 16)
        cpu = sum(s.cpu() for s in servers)
        latencies, calls = await timed(lambda i: caller.call(echo), seconds, 16)
        used = sum(s.cpu() for s in servers) - cpu
    finally:
        await caller.http.aclose()
        for server in servers:
            server.stop()
    row = {"replicas": replicas, "calls_s": calls / seconds, "p50": pct(latencies, 0.5), "p99": pct(latencies, 0.99), "cpu_us": used / calls * 1e6}
    print(json.dumps(row), flush=True)
    return row


def fmt(value: float | None, digits: int = 1) -> str:
    return "–" if value is None else f"{value:,.{digits}f}"


def write(
    rows: list[dict[str, Any]], echo: list[dict[str, Any]], output: Path, options: argparse.Namespace,
    indexed: list[dict[str, Any]] = (), builds: list[dict[str, Any]] = (),  # type: ignore[assignment]
) -> None:
    lines = [
        "# Store benchmark",
        "",
        f"`{' '.join(['.venv/bin/python', 'bench/store.py', *sys.argv[1:]])}` on {time.strftime('%Y-%m-%d')}, "
        f"{os.cpu_count()} CPUs; servers on CPU 0, the Python load generator on CPU 1; c=1, "
        f"{options.seconds:g} s per row. p50/p99 in ms through the service (HTTP, auth, MCP, MCP-AQL); "
        "the floor is the same operation on the engine in process (`bench/store.py` docstring). "
        "CPU is the server process's CPU per call.",
        "",
        "| engine | records | operation | p50 ms | p99 ms | calls/s | server CPU µs/call | floor p50 ms |",
        "|---|---:|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['engine']} | {r['records']:,} | {r['operation']} | {fmt(r['p50'], 2)} | {fmt(r['p99'], 2)} | "
            f"{fmt(r['calls_s'], 0)} | {fmt(r['cpu_us'], 0)} | {fmt(r['floor_p50'], 2)} |"
        )
    if indexed:
        lines += [
            "",
            "Indexed queries (issue 25): the collection declares `n` (number) and `status` (string) through",
            "`create_index`; the same columns as above. The listings read the index for the equality, the",
            "range, and the range sorted by its field.",
            "",
            "| engine | records | operation | p50 ms | p99 ms | calls/s | server CPU µs/call | floor p50 ms |",
            "|---|---:|---|---:|---:|---:|---:|---:|",
        ]
        for r in indexed:
            lines.append(
                f"| {r['engine']} | {r['records']:,} | {r['operation']} | {fmt(r['p50'], 2)} | {fmt(r['p99'], 2)} | "
                f"{fmt(r['calls_s'], 0)} | {fmt(r['cpu_us'], 0)} | {fmt(r['floor_p50'], 2)} |"
            )
        lines += [
            "",
            "Each index built by `create_index` on the seeded collection, with `create_record` calls sent one after",
            "another meanwhile (SQLite's build holds the write lock: a write waits up to `store.lock_timeout_seconds`).",
            "",
            "| engine | records | index | build s | state | writes meanwhile | failed | longest write ms |",
            "|---|---:|---|---:|---|---:|---:|---:|",
        ]
        for b in builds:
            lines.append(
                f"| {b['engine']} | {b['records']:,} | {b['index']} | {fmt(b['seconds'], 2)} | {b['state']} | "
                f"{b['writes']} | {b['failed_writes']} | {fmt(b['longest_write_ms'], 1)} |"
            )
    lines += [] if not echo else [
        "",
        "Echo (`tools/call` of the echo plugin) at c=16 on PostgreSQL-backed replicas, the client sending",
        "each call to the next replica. All replicas share CPU 0 of this 2-core machine, so more replicas",
        "cannot add throughput here; the server CPU per call shows what the shared store adds.",
        "",
        "| replicas | calls/s | p50 ms | p99 ms | server CPU µs/call (all replicas) |",
        "|---:|---:|---:|---:|---:|",
    ]
    for r in echo:
        lines.append(f"| {r['replicas']} | {fmt(r['calls_s'], 0)} | {fmt(r['p50'], 2)} | {fmt(r['p99'], 2)} | {fmt(r['cpu_us'], 0)} |")
    notes = "\n"
    if output.exists() and NOTES_MARKER in output.read_text(encoding="utf-8"):
        notes = output.read_text(encoding="utf-8").split(NOTES_MARKER, 1)[1]
    output.write_text("\n".join([*lines, "", NOTES_MARKER]) + notes, encoding="utf-8")


def sizes(option: str) -> list[int]:
    """`--sizes 1000,100000` as numbers; an empty option runs no size."""
    return [int(size) for size in option.split(",") if size.strip()]


async def main(options: argparse.Namespace) -> None:
    os.sched_setaffinity(0, {1})
    root = Path(tempfile.mkdtemp(prefix="aql-store-bench-"))
    rows: list[dict[str, Any]] = []
    echo: list[dict[str, Any]] = []
    indexed: list[dict[str, Any]] = []
    builds: list[dict[str, Any]] = []
    with postgres(root) as pg_server:
        for engine in options.engines.split(","):
            for count in sizes(options.sizes):
                stall = options.only == "stall"
                rows += await measure_records(engine, count, root, pg_server, options.seconds, stall)
            for count in sizes(options.indexed_sizes) if options.only is None else ():
                found, built = await measure_indexed(engine, count, root, pg_server, options.seconds)
                indexed += found
                builds += built
        for replicas in (1, 3) if options.echo and options.only is None else ():
            echo.append(await measure_echo(pg_server, root, replicas, options.seconds))
    write(rows, echo, Path(options.output), options, indexed, builds)
    shutil.rmtree(root, ignore_errors=True)
    print(f"store bench: wrote {options.output}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--listings"]:
        asyncio.run(run_listings(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])))
        sys.exit(0)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engines", default="sqlite,postgres")
    parser.add_argument("--sizes", default="1000,100000")
    parser.add_argument("--indexed-sizes", default="1000,100000,1000000", help="collection sizes of the indexed rows")
    parser.add_argument("--no-echo", dest="echo", action="store_false", help="skip the replica echo rows")
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--output", default=None, help="the table to write (default bench/STORE.md)")
    parser.add_argument("--only", choices=("stall",), help="only the rows of a ping while scanning listings run")
    arguments = parser.parse_args()
    if arguments.output is None:
        if arguments.only is not None:
            parser.error("--only needs --output: a partial run must not replace bench/STORE.md")
        arguments.output = str(ROOT / "bench" / "STORE.md")
    asyncio.run(main(arguments))
