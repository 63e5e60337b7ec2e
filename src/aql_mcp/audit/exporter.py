"""`aql-mcp audit export`: the records as NDJSON, one JSON object a line (docs/audit.md, "Exporting").

Without `--follow` the records written in [since, until) are printed in the order they were stored.
With it, the exporter goes on printing new records as they commit, chain by chain: a chain's records
commit in sequence order (one writer at a time per chain), so the last sequence number printed per
chain is an exact position, whatever order the replicas' transactions commit in. Only the chains of
today and yesterday (UTC) are polled after the first pass: no record joins an older chain.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import orjson

from aql_mcp.audit.record import as_json, timestamp
from aql_mcp.store.audit import AuditRow, AuditStore

PAGE = 1000
DAY_SECONDS = 86_400

Write = Callable[[bytes], None]


def line(row: AuditRow) -> bytes:
    return orjson.dumps(as_json(row)) + b"\n"


async def export(store: AuditStore, write: Write, *, since: str | None = None, until: str | None = None) -> int:
    """Print the records written in [since, until); how many."""
    after, count = 0, 0
    while True:
        page = await store.records(since=since, until=until, after_id=after, limit=PAGE)
        for row in page:
            write(line(row))
        count += len(page)
        if len(page) < PAGE:
            return count
        after = page[-1].id


class Follower:
    """Prints every record written at or after `since`, and then each new one, once."""

    def __init__(self, store: AuditStore, write: Write, *, since: str | None = None) -> None:
        self._store = store
        self._write = write
        self._since = since
        self._positions: dict[str, int] = {}

    async def run(self, every: float, flush: Callable[[], None]) -> None:
        """Poll every `every` seconds until cancelled."""
        await self.poll(first=True)
        flush()
        while True:
            await asyncio.sleep(every)
            await self.poll()
            flush()

    async def poll(self, *, first: bool = False) -> int:
        """One pass over the chains that may have new records; how many were printed."""
        recent = timestamp(time.time() - DAY_SECONDS)[:10]
        printed = 0
        for chain in await self._store.chains():
            day = chain.rsplit("/", 1)[-1]
            if (self._since and day < self._since[:10]) or (not first and day < recent):
                continue
            printed += await self._chain(chain)
        return printed

    async def _chain(self, chain: str) -> int:
        printed = 0
        while True:
            page = await self._store.chain(chain, after_seq=self._positions.get(chain, 0), limit=PAGE)
            for row in page:
                if self._since is None or row.recorded_at >= self._since:
                    self._write(line(row))
                    printed += 1
            if page:
                self._positions[chain] = page[-1].seq
            if len(page) < PAGE:
                return printed
