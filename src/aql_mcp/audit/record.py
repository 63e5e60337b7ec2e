"""One audit record: what it holds, its chain, and its hash (docs/audit.md, "The record", "The chain").

A record's hash is sha256 over the previous record's hash, a newline and the record's canonical
JSON (its fields, `id`, `prev_hash` and `hash` excepted, keys sorted, no spaces). The chain and the
sequence number are among the fields, so a record moved to another place in its chain, or into
another chain, no longer matches its hash. A chain is one replica's records of one UTC day.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import orjson

from aql_mcp.store.audit import COLUMNS, AuditRow, ChainHead

# The fields a record's hash covers: every column but the hashes themselves.
HASHED = tuple(column for column in COLUMNS if column not in ("prev_hash", "hash"))
# Kinds of record a full queue may drop (docs/audit.md, "Reads"); every other kind is waited for.
READ = "read"


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """A decision to record, before it has a place in a chain. `subject` is the caller's digest (or
    the subject itself under `audit.subject: clear`), `actors` the digests of its actor chain,
    `params_digest` the parameters' `params_digest`, never the parameters."""

    recorded_at: str
    kind: str
    operation: str
    outcome: str
    subject: str
    actors: tuple[str, ...] = ()
    tenant: str | None = None
    request_id: str | None = None
    trace_id: str | None = None
    era: str | None = None
    tool: str | None = None
    code: str | None = None
    params_digest: str | None = None
    resource_id: str | None = None

    def chain(self, replica: str) -> str:
        """The chain this entry joins: the replica's chain of the entry's UTC day."""
        return f"{replica}/{self.recorded_at[:10]}"


def timestamp(epoch: float | None = None) -> str:
    """ISO 8601 UTC with microseconds, one fixed width: text order is time order."""
    now = time.time() if epoch is None else epoch
    whole = int(now)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + f".{int((now - whole) * 1_000_000):06d}Z"


def moment(value: str) -> str:
    """An ISO 8601 date or time (UTC unless it names a zone) as the trail's timestamps are written,
    so it compares with them as text; ValueError when it is neither."""
    parsed = datetime.fromisoformat(value)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return timestamp(parsed.timestamp())


def params_digest(params: Any) -> str | None:
    """sha256 of the parameters' canonical JSON (keys sorted): two calls with the same parameters
    share it, and it tells nothing of them. None when the call had none."""
    if params is None:
        return None
    canonical = orjson.dumps(params, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS, default=str)
    return hashlib.sha256(canonical).hexdigest()


def canonical(row: AuditRow) -> bytes:
    return orjson.dumps({field: getattr(row, field) for field in HASHED}, option=orjson.OPT_SORT_KEYS)


def hash_of(prev_hash: str, row: AuditRow) -> str:
    return hashlib.sha256(prev_hash.encode("ascii") + b"\n" + canonical(row)).hexdigest()


def seal(entries: Sequence[AuditEntry], heads: Mapping[str, ChainHead], replica: str) -> list[AuditRow]:
    """The entries as rows, each following the one before it in its chain, starting at `heads`."""
    ends = dict(heads)
    rows = []
    for entry in entries:
        chain = entry.chain(replica)
        head = ends[chain]
        unsealed = _row(entry, chain, head.seq + 1, replica, head.hash)
        row = replace(unsealed, hash=hash_of(head.hash, unsealed))
        ends[chain] = ChainHead(row.seq, row.hash)
        rows.append(row)
    return rows


def _row(entry: AuditEntry, chain: str, seq: int, replica: str, prev_hash: str) -> AuditRow:
    return AuditRow(
        chain=chain,
        seq=seq,
        recorded_at=entry.recorded_at,
        replica=replica,
        request_id=entry.request_id,
        trace_id=entry.trace_id,
        subject=entry.subject,
        actors=orjson.dumps(list(entry.actors)).decode(),
        tenant=entry.tenant,
        era=entry.era,
        tool=entry.tool,
        operation=entry.operation,
        kind=entry.kind,
        outcome=entry.outcome,
        code=entry.code,
        params_digest=entry.params_digest,
        resource_id=entry.resource_id,
        prev_hash=prev_hash,
        hash="",
    )


def as_json(row: AuditRow) -> dict[str, Any]:
    """A stored record as the exporter prints it: every column, `actors` as a list."""
    values: dict[str, Any] = {field: getattr(row, field) for field in ("id", *COLUMNS)}
    values["actors"] = orjson.loads(row.actors)
    return values
