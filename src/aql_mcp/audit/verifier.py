"""`aql-mcp audit verify`: every chain walked from its anchor, each record's hash recomputed
(docs/audit.md, "Verifying").

A chain starts after its newest checkpoint below its first record: its `anchor` (sequence 0) or the
`prune` checkpoint that deleted the records before it. From there each record must carry the next
sequence number, the previous record's hash as `prev_hash`, and the hash of its own fields. The
first record that does not is the chain's break; a chain with a checkpoint but none of the records
after it (a gap at its start) breaks at the first missing number. An anchor that names the replica's
previous chain must name a record still there (or one a prune took), so the newest record of one
day's chain cut away shows on the next day's; records cut from the end of the newest chain do not
show in the chain (docs/audit.md, "What verify cannot see").
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass

from aql_mcp.audit.record import hash_of
from aql_mcp.store.audit import GENESIS, AuditRow, AuditStore, ChainHead, Checkpoint

PAGE = 1000


@dataclass(frozen=True, slots=True)
class Broken:
    """Where a chain stops verifying: its name, the sequence number, and why."""

    chain: str
    seq: int
    reason: str


@dataclass(frozen=True, slots=True)
class Report:
    chains: int
    records: int
    broken: tuple[Broken, ...]

    @property
    def ok(self) -> bool:
        return not self.broken


async def verify(store: AuditStore) -> Report:
    """Walk every chain; a chain's first break is reported, the walk goes on with the next chain."""
    checkpoints = await store.checkpoints()
    anchored = {c.hash for c in checkpoints if c.reason == "anchor" and c.hash != GENESIS}
    seen: set[str] = set()
    broken: list[Broken] = []
    records = 0
    chains = await store.chains()
    for chain in chains:
        count, problem = await _walk(store, chain, _start(chain, checkpoints), anchored, seen)
        records += count
        if problem is not None:
            broken.append(problem)
    broken.extend(_loose_anchors(checkpoints, seen))
    return Report(chains=len(chains), records=records, broken=tuple(broken))


def _start(chain: str, checkpoints: Iterable[Checkpoint]) -> ChainHead | None:
    """Where the chain's records begin: its newest checkpoint (highest sequence number)."""
    own = [c for c in checkpoints if c.chain == chain]
    if not own:
        return None
    newest = max(own, key=lambda c: c.seq)
    return ChainHead(newest.seq, newest.hash)


async def _walk(
    store: AuditStore, chain: str, start: ChainHead | None, anchored: set[str], seen: set[str]
) -> tuple[int, Broken | None]:
    """The chain's records counted, and its first break; the hashes named by anchors it holds go to `seen`."""
    if start is None:
        first = await store.chain(chain, after_seq=-1, limit=1)
        return 0, Broken(chain, first[0].seq if first else 0, "the chain has no anchor checkpoint")
    head, count = start, 0
    async for row in _rows(store, chain, start.seq):
        count += 1
        problem = _check(row, head)
        if problem is not None:
            return count, Broken(chain, head.seq + 1, problem)
        if row.hash in anchored:
            seen.add(row.hash)
        head = ChainHead(row.seq, row.hash)
    return count, None


def _check(row: AuditRow, head: ChainHead) -> str | None:
    if row.seq != head.seq + 1:
        return f"record {head.seq + 1} is missing (found {row.seq} next)"
    if row.prev_hash != head.hash:
        return "its prev_hash is not the hash of the record before it"
    if row.hash != hash_of(row.prev_hash, row):
        return "its fields do not match its hash (changed, or moved from another place)"
    return None


async def _rows(store: AuditStore, chain: str, after: int) -> AsyncIterator[AuditRow]:
    while True:
        page = await store.chain(chain, after_seq=after, limit=PAGE)
        for row in page:
            yield row
        if len(page) < PAGE:
            return
        after = page[-1].seq


def _loose_anchors(checkpoints: Iterable[Checkpoint], seen: set[str]) -> list[Broken]:
    """Anchors naming a record that is gone, though no prune of the replica's chains took it: the
    end of the chain before was cut (or the anchor forged)."""
    pruned = {c.hash for c in checkpoints if c.reason == "prune"}
    pruned_replicas = {_replica(c.chain) for c in checkpoints if c.reason == "prune"}
    return [
        Broken(c.chain, 0, "its anchor names a record of the chain before it that is gone: records were cut")
        for c in checkpoints
        if c.reason == "anchor"
        and c.hash != GENESIS
        and c.hash not in seen
        and c.hash not in pruned
        and _replica(c.chain) not in pruned_replicas
    ]


def _replica(chain: str) -> str:
    return chain.rsplit("/", 1)[0]
