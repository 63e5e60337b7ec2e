"""The audit trail on every engine: chains that verify, tampering that does not, the database
refusing to change or delete records, prune, export (store/audit.py, aql_mcp/audit/; docs/audit.md)."""

from __future__ import annotations

import asyncio
import itertools

import orjson
import pytest

from aql_mcp.audit.exporter import Follower, export
from aql_mcp.audit.record import timestamp
from aql_mcp.audit.verifier import verify
from aql_mcp.audit.writer import AuditTrail
from aql_mcp.exceptions import UpstreamUnavailable
from aql_mcp.operations.audit import AuditLog
from aql_mcp.store.audit import AuditQuery
from aql_mcp.store.base import Store
from aql_mcp.store.factory import open_store
from tests.support.audit import entry, run_sql
from tests.support.engines import Backend

pytestmark = pytest.mark.anyio
DAY = 86_400.0
# Records of one moment fall in one UTC day, whenever the test runs.
AT = 1_700_000_000.0
SWAP = (
    "UPDATE audit_records SET seq = -2 WHERE seq = 2",
    "UPDATE audit_records SET seq = 2 WHERE seq = 6",
    "UPDATE audit_records SET seq = 6 WHERE seq = -2",
)


async def _write(store: Store, count: int, at: float | None = None) -> AuditTrail:
    """`count` records written at once, in batches of 4 (at `at`, default now)."""
    trail = AuditTrail(store.audit, batch_size=4)
    await asyncio.gather(*(trail.append(entry(n, at=at)) for n in range(count)))
    return trail


async def test_records_written_together_form_one_valid_chain_per_replica_and_day(store: Store) -> None:
    await _write(store, 10, at=AT)
    rows = await store.audit.records()
    day = rows[0].recorded_at[:10]
    assert {row.chain for row in rows} == {f"{store.audit.replica}/{day}"}
    assert [row.seq for row in rows] == list(range(1, 11))
    assert [row.resource_id for row in rows] == [f"r{n}" for n in range(10)]
    assert rows[0].prev_hash == "0" * 64
    assert all(later.prev_hash == earlier.hash for earlier, later in itertools.pairwise(rows))
    report = await verify(store.audit)
    assert (report.ok, report.chains, report.records) == (True, 1, 10)


async def test_each_utc_day_starts_a_chain_anchored_on_the_last_record_before_it(store: Store) -> None:
    trail = AuditTrail(store.audit)
    await trail.append(entry(0, at=1_700_000_000.0))
    await trail.append(entry(1, at=1_700_000_000.0 + DAY))
    first, second = await store.audit.records()
    assert first.chain != second.chain
    assert second.seq == 1
    anchors = [c for c in await store.audit.checkpoints() if c.chain == second.chain]
    assert [(c.reason, c.seq, c.hash) for c in anchors] == [("anchor", 0, first.hash)]
    assert second.prev_hash == first.hash
    assert (await verify(store.audit)).ok


@pytest.mark.parametrize(
    ("change", "broken_seq"),
    [
        ("UPDATE audit_records SET outcome = 'refused' WHERE seq = 3", 3),
        ("UPDATE audit_records SET subject = 'someone-else' WHERE seq = 5", 5),
        ("DELETE FROM audit_records WHERE seq = 4", 4),
        ("DELETE FROM audit_records WHERE seq = 1", 1),
        ("swap 2 and 6", 2),
    ],
)
async def test_changing_deleting_or_reordering_a_record_breaks_its_chain_there(
    backend: Backend, change: str, broken_seq: int
) -> None:
    store = await backend.open()
    await _write(store, 8, at=AT)
    chain = (await store.audit.records())[0].chain
    if change.startswith("swap"):
        # Through a free number: (chain, seq) is unique at every step.
        for step in SWAP:
            await run_sql(backend, step, bypass=True)
    else:
        await run_sql(backend, change, bypass=True)
    report = await verify(store.audit)
    assert not report.ok
    assert [(b.chain, b.seq) for b in report.broken] == [(chain, broken_seq)]


async def test_the_database_refuses_to_change_or_delete_records_and_checkpoints(backend: Backend) -> None:
    store = await backend.open()
    await _write(store, 3, at=AT)
    refusals = [
        "UPDATE audit_records SET outcome = 'refused' WHERE seq = 1",
        "DELETE FROM audit_records WHERE seq = 3",
        "DELETE FROM audit_records",
        "UPDATE audit_checkpoints SET hash = 'x'",
        "DELETE FROM audit_checkpoints",
    ]
    if backend.engine == "postgres":
        refusals += ["TRUNCATE audit_records", "TRUNCATE audit_checkpoints"]
    for sql in refusals:
        with pytest.raises(Exception, match="append-only"):
            await run_sql(backend, sql)
    assert len(await store.audit.records()) == 3
    assert (await verify(store.audit)).ok


async def test_prune_deletes_old_records_behind_a_checkpoint_and_the_chains_still_verify(store: Store) -> None:
    trail = AuditTrail(store.audit)
    old = 1_700_000_000.0
    for n in range(3):
        await trail.append(entry(n, at=old + n))
    for n in range(3, 5):
        await trail.append(entry(n, at=old + 2 * DAY + n))
    assert await store.audit.prune(timestamp(old + DAY), now=timestamp()) == 3
    rows = await store.audit.records()
    assert [row.resource_id for row in rows] == ["r3", "r4"]
    prune = [c for c in await store.audit.checkpoints() if c.reason == "prune"]
    assert [(c.seq, c.pruned_before) for c in prune] == [(3, timestamp(old + DAY))]
    assert (await verify(store.audit)).ok
    # The old day's chain, emptied, takes no new records but the trail goes on after the prune.
    await trail.append(entry(5, at=old + 2 * DAY + 10))
    assert (await verify(store.audit)).ok
    assert await store.audit.prune(timestamp(old + DAY), now=timestamp()) == 0


async def test_three_replicas_writing_at_once_keep_every_chain_valid(backend: Backend) -> None:
    stores = [await backend.open() for _ in range(3)]
    trails = [AuditTrail(store.audit, batch_size=3) for store in stores]
    await asyncio.gather(*(trail.append(entry(n, at=AT)) for n in range(20) for trail in trails))
    rows = await stores[0].audit.records(limit=1000)
    assert len(rows) == 60
    report = await verify(stores[0].audit)
    assert report.ok, report.broken
    chains = {row.chain for row in rows}
    assert len(chains) == (1 if backend.engine == "sqlite" else 3)


async def test_a_full_queue_drops_reads_and_counts_them_but_makes_writes_wait(store: Store) -> None:
    dropped: list[int] = []
    trail = AuditTrail(store.audit, capacity=2, batch_size=2, on_drop=dropped.append)
    for n in range(5):
        trail.offer(entry(n, kind="read"))
    assert (trail.dropped, sum(dropped)) == (3, 3)
    await asyncio.gather(*(trail.append(entry(10 + n)) for n in range(6)))
    await trail.drain()
    rows = await store.audit.records()
    assert [row.kind for row in rows].count("read") == 2
    assert sorted(row.resource_id for row in rows if row.kind == "mutation") == [f"r{10 + n}" for n in range(6)]
    assert (await verify(store.audit)).ok


async def test_a_flood_of_refusals_is_dropped_and_counted_without_waiting_whatever_audit_reads_says(
    store: Store,
) -> None:
    dropped: list[int] = []
    log = AuditLog(AuditTrail(store.audit, capacity=3, on_drop=dropped.append))
    assert not log.reads
    for n in range(10):  # not awaited: offer never waits
        log.offer("auth_failure", operation="authenticate", principal="anonymous", outcome="invalid_token")
        log.offer("rate_limit", operation="/mcp", principal=f"{n:016x}", outcome="refused", code="rate")
    assert sum(dropped) == 17
    assert log.trail is not None
    await log.trail.drain()
    rows = await store.audit.records()
    assert [(row.kind, row.outcome, row.code) for row in rows] == [
        ("auth_failure", "invalid_token", None),
        ("rate_limit", "refused", "rate"),
        ("auth_failure", "invalid_token", None),
    ]
    assert {row.params_digest for row in rows} == {None}


async def test_a_store_failure_fails_the_writes_waiting_for_their_batch(backend: Backend) -> None:
    """A store that cannot write (here: not open) fails the call waiting for its record: 503, not acknowledged."""
    trail = AuditTrail(open_store(backend.settings).audit)
    with pytest.raises(UpstreamUnavailable):
        await trail.append(entry(0))
    trail.offer(entry(1, kind="read"))
    await trail.drain()
    assert trail.dropped == 1


async def test_export_prints_the_records_of_a_time_window_as_ndjson(store: Store) -> None:
    trail = AuditTrail(store.audit)
    base = 1_700_000_000.0
    for n in range(5):
        await trail.append(entry(n, at=base + n * 10))
    lines: list[bytes] = []
    assert await export(store.audit, lines.append, since=timestamp(base + 10), until=timestamp(base + 40)) == 3
    printed = [orjson.loads(line) for line in lines]
    assert [p["resource_id"] for p in printed] == ["r1", "r2", "r3"]
    assert set(printed[0]) >= {"chain", "seq", "recorded_at", "hash", "prev_hash", "params_digest", "actors"}


async def test_follow_prints_each_record_once_as_it_commits(store: Store) -> None:
    trail = AuditTrail(store.audit)
    await trail.append(entry(0))
    lines: list[bytes] = []
    follower = Follower(store.audit, lines.append)
    assert await follower.poll(first=True) == 1
    assert await follower.poll() == 0
    await trail.append(entry(1))
    await trail.append(entry(2))
    assert await follower.poll() == 2
    assert [b'"r0"' in line for line in lines] == [True, False, False]
    assert len(lines) == 3


async def test_find_filters_by_resource_subject_kind_outcome_and_time_newest_first(store: Store) -> None:
    trail = AuditTrail(store.audit)
    await trail.append(entry(0, at=AT, kind="execution", outcome="pending", resource_id="exec_1"))
    await trail.append(entry(1, at=AT + 1, kind="execution", outcome="running", resource_id="exec_1"))
    await trail.append(entry(2, at=AT + 2, kind="refusal", outcome="refused", subject="b" * 16, resource_id="x"))
    await trail.append(entry(3, at=AT + 3, kind="execution", outcome="completed", resource_id="exec_1"))

    async def found(limit: int = 10, **query: str) -> list[str]:
        return [row.outcome for row in await store.audit.find(AuditQuery(**query), limit=limit)]

    assert await found(resource_id="exec_1") == ["completed", "running", "pending"]
    assert await found(resource_id="exec_1", limit=2) == ["completed", "running"]
    assert await found(subject="b" * 16) == ["refused"]
    assert await found(kind="execution", outcome="running") == ["running"]
    assert await found(since=timestamp(AT + 1), until=timestamp(AT + 3)) == ["refused", "running"]
    assert await found(resource_id="absent") == []
    assert len(await found()) == 4


async def test_closing_the_store_writes_what_was_queued_without_waiting(backend: Backend) -> None:
    """A read, a refusal or a worker's state change is queued without waiting for the database;
    the service closes its store at shutdown, and closing writes them first (docs/audit.md, "Writing")."""
    store = await backend.open()
    reads, events = AuditTrail(store.audit), AuditTrail(store.audit)
    for n in range(3):
        reads.offer(entry(n, kind="read"))
    events.put(entry(3, kind="execution"))
    await store.close()
    backend.opened.remove(store)  # closed here, as the service closes it: not again by the fixture

    reopened = await backend.open()
    rows = await reopened.audit.records()
    assert sorted(row.resource_id or "" for row in rows) == ["r0", "r1", "r2", "r3"]
    assert (await verify(reopened.audit)).ok
