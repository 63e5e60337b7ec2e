"""The audit trail at scale: three real `aql-mcp serve` replicas on one PostgreSQL writing records at
once through /mcp. Every chain verifies with `aql-mcp audit verify`, each replica writes chains of its
own, and the trail holds exactly the acknowledged writes and refusals (docs/audit.md, "The chain")."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from aql_mcp.auth.principal import subject_digest
from aql_mcp.store.audit import AuditRow
from tests.support.aql import session
from tests.support.engines import Backend
from tests.support.replicas import Replicas, start_replicas, wait_for_replica_count
from tests.support.server import ServerProcess

WRITERS_PER_REPLICA = 3
WRITES = 20
REFUSALS = 4
# Nothing here is about the rate limiter: each writer has its own subject, and room to spare.
ROOMY = {"AQL_MCP_LIMITS__RATE_PER_SECOND": "1000", "AQL_MCP_LIMITS__RATE_BURST": "1000"}


@dataclass
class Written:
    """What the writers were answered: acknowledged records' ids and refusals, by subject."""

    acknowledged: list[str] = field(default_factory=list)
    refused: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def _write(server: ServerProcess, replicas: Replicas, subject: str, written: Written) -> None:
    """A collection, WRITES create_record calls into it and REFUSALS into a missing one, in one session
    on `server`."""
    try:
        with session(server, token=replicas.token(subject)) as caller:
            # A caller's collections are its own: each writer makes one (a write with its record too).
            assert caller.call("mcp_aql_create", "create_collection", collection="notes")["success"]
            for n in range(WRITES + REFUSALS):
                collection = "notes" if n < WRITES else "missing"
                answer = caller.call("mcp_aql_create", "create_record", collection=collection, data={"n": n})
                with written.lock:
                    if answer["success"]:
                        written.acknowledged.append(answer["data"]["id"])
                    else:
                        written.refused[subject] += 1
    except Exception as exc:  # reported by the test, which must not pass on a writer that died
        with written.lock:
            written.failures.append(f"{subject}: {exc!r}")


def _verify(database: str, state: Path) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "AQL_MCP_STORE__URL": database, "AQL_MCP_STORE__PATH": str(state)}
    return subprocess.run(
        [sys.executable, "-m", "aql_mcp.main", "audit", "verify", "--dev"],
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


async def _records(database: str, state: Path) -> list[AuditRow]:
    backend = Backend("postgres", state, database)
    store = await backend.open()
    try:
        rows: list[AuditRow] = []
        while page := await store.audit.records(after_id=rows[-1].id if rows else 0):
            rows += page
        return rows
    finally:
        await store.close()


def test_three_replicas_writing_at_once_keep_valid_chains_holding_every_acknowledged_write(
    database: str, tmp_path: Path
) -> None:
    written = Written()
    with start_replicas(tmp_path / "replicas", database, env=ROOMY) as replicas:
        wait_for_replica_count(replicas, 3)
        writers = [
            threading.Thread(target=_write, args=(server, replicas, f"writer-{index}-{n}", written))
            for index, server in enumerate(replicas.servers)
            for n in range(WRITERS_PER_REPLICA)
        ]
        for writer in writers:
            writer.start()
        for writer in writers:
            writer.join(timeout=300)
    assert written.failures == []
    assert len(written.acknowledged) == len(writers) * WRITES

    verified = _verify(database, tmp_path)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    rows = asyncio.run(_records(database, tmp_path))
    summary = verified.stdout.strip().splitlines()[-1]
    assert summary.startswith("audit verify: "), summary
    assert summary.endswith(": ok"), summary
    assert f"{len(rows)} record(s)" in summary

    created = [row for row in rows if row.kind == "mutation" and row.operation == "create_record"]
    assert sorted(row.resource_id or "" for row in created) == sorted(written.acknowledged)
    collections = [row for row in rows if row.kind == "mutation" and row.operation == "create_collection"]
    assert len(collections) == len(writers)
    refusals = Counter(row.subject for row in rows if row.kind == "refusal" and row.operation == "create_record")
    assert refusals == {subject_digest(subject): count for subject, count in written.refused.items()}
    assert sum(refusals.values()) == len(writers) * REFUSALS
    assert len(rows) == len(writers) * (1 + WRITES + REFUSALS)  # nothing else was decided
    # Each replica writes chains of its own, numbered 1, 2, 3... without gaps, whoever wrote beside it.
    by_chain: dict[str, list[int]] = {}
    for row in rows:
        by_chain.setdefault(row.chain, []).append(row.seq)
    assert len({row.replica for row in rows}) == 3
    assert {row.chain.split("/")[0] for row in rows} == {row.replica for row in rows}
    for chain, seqs in by_chain.items():
        assert sorted(seqs) == list(range(1, len(seqs) + 1)), chain
    assert f"{len(by_chain)} chain(s)" in summary
