"""PostgreSQL rows of the records tables as the record store's values (plugins/records/postgres.py)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import orjson

from aql_mcp.plugins.records.indexes import from_json
from aql_mcp.plugins.records.listing import Key
from aql_mcp.plugins.records.store import StoredCollection, StoredRecord


def record_of(row: Any) -> StoredRecord:
    return StoredRecord(
        row["collection"],
        row["id"],
        orjson.loads(row["data"]),
        row["etag"],
        row["created_at"],
        row["updated_at"],
        int(row["pos"]),
    )


def key_of(row: Any) -> Key:
    number = row["k_number"]
    if isinstance(number, Decimal):
        # An integer as int while orjson can write it into a cursor (64 bits); any other number as the
        # float it was stored from (orjson writes no integer wider than that, so nothing is lost).
        integral = number == number.to_integral_value() and -(2**63) <= number < 2**64
        number = int(number) if integral else float(number)
    return Key(int(row["k_rank"]), number, row["k_text"], int(row["pos"]))


def collection_of(row: Any) -> StoredCollection:
    fields = tuple(orjson.loads(row[2])) if row[2] is not None else None
    indexes = from_json(orjson.loads(row[5]) if row[5] else None)
    return StoredCollection(row[0], row[1], fields, row[3], int(row[4]), indexes)
