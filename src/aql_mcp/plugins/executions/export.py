"""An export written in parts, and read in parts (docs/executions.md, "Exports").

The collection is read a page at a time (`batch_size` records, the listing's keyset) and its
NDJSON cut into parts of at most `part_bytes`, each stored in a short transaction of its own as
soon as it is full: an export holds one page and one part in memory whatever its size, and the
store's writer is never held for more than one part. Concatenated in order, the parts are the
export; a part ends at a line end unless one record's line is longer than a part, which is then
cut at a character boundary (every part is valid UTF-8, as a resource's `text` must be).

A `resources/read` answer never carries more than `limits.max_result_bytes`: the export's URI
answers the whole NDJSON when it fits, and otherwise -32602 naming the limit and the parts' URIs
(`records://exports/{execution_id}/parts/{part}`, 0 to `parts - 1`), each of which fits.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import orjson

from aql_mcp.builtin_sections import ExecutionSettings
from aql_mcp.plugin import Content, InvalidParams, ResourceNotFound, text_contents
from aql_mcp.plugins.executions.backoff import retrying
from aql_mcp.plugins.executions.store import EXPORTING, ExecutionRecord, ExecutionStore, Progress
from aql_mcp.plugins.records.listing import Listing
from aql_mcp.plugins.records.operations import record_wire
from aql_mcp.plugins.records.store import RecordStore

T = TypeVar("T")
EXPORT_TEMPLATE = "records://exports/{execution_id}"
PART_TEMPLATE = "records://exports/{execution_id}/parts/{part}"
NDJSON = "application/x-ndjson"
# A part number is a plain decimal (no sign, no leading zeros beyond "0"), below this.
MAX_PART = 2**31
# Room in a `resources/read` answer for everything but the part's text: the JSON-RPC envelope, the
# URI, the MIME type, an SSE frame's prefix.
ENVELOPE_BYTES = 1024
# The smallest part, whatever the settings: a record's line is cut across parts below it.
MIN_PART_BYTES = 256


class ExportTooLarge(Exception):
    """The export passed `executions.max_export_bytes`; its parts are left to the retention."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"export over {limit} bytes")
        self.limit = limit


def readable_bytes(max_result_bytes: int) -> int:
    """The most NDJSON one `resources/read` answer carries within `limits.max_result_bytes`. JSON
    escapes at most double a text made of JSON (a `"` or `\\` becomes two bytes, and NDJSON holds
    no raw control character), so half the limit, less the envelope, always fits."""
    return max(MIN_PART_BYTES, (max_result_bytes - ENVELOPE_BYTES) // 2)


def part_bytes(settings: ExecutionSettings, max_result_bytes: int) -> int:
    """The size parts are cut at: `export_part_bytes`, and never more than one read can answer."""
    return min(settings.export_part_bytes, readable_bytes(max_result_bytes))


class Parts:
    """Cuts NDJSON lines into numbered parts of at most `limit` bytes."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._buffer = bytearray()
        self.count = 0
        self.size = 0

    def add(self, line: bytes) -> list[tuple[int, bytes]]:
        """The parts `line` completes, numbered from 0."""
        done: list[tuple[int, bytes]] = []
        if self._buffer and len(self._buffer) + len(line) > self._limit:
            done.append(self._cut(len(self._buffer)))
        self._buffer += line
        while len(self._buffer) > self._limit:
            done.append(self._cut(_boundary(self._buffer, self._limit)))
        self.size += len(line)
        return done

    def rest(self) -> list[tuple[int, bytes]]:
        """The last part, if anything is left."""
        return [self._cut(len(self._buffer))] if self._buffer else []

    def _cut(self, at: int) -> tuple[int, bytes]:
        part = (self.count, bytes(self._buffer[:at]))
        del self._buffer[:at]
        self.count += 1
        return part


def _boundary(data: bytearray, at: int) -> int:
    """The last character boundary at or before `at` (UTF-8 continuation bytes are 0b10xxxxxx)."""
    while at > 0 and data[at] & 0xC0 == 0x80:
        at -= 1
    return at


class Exporter:
    """Writes one export's parts; the worker runs it (plugins/executions/worker.py)."""

    def __init__(
        self,
        store: ExecutionStore,
        records: RecordStore,
        settings: ExecutionSettings,
        *,
        max_result_bytes: int,
        wake: Callable[[str], None],
        clock: Callable[[], float],
    ) -> None:
        self._store = store
        self._records = records
        self._settings = settings
        self._part_bytes = part_bytes(settings, max_result_bytes)
        self._wake = wake
        self._clock = clock

    async def run(self, record: ExecutionRecord, collection: str, total: int) -> dict[str, Any] | None:
        """The export's result once every part is stored; None when it stopped (cancelled or
        superseded). Raises `ExportTooLarge` past `max_export_bytes`."""
        if not await self._retry(
            record, functools.partial(self._store.clear_output, record.id, attempt=record.attempts)
        ):
            return None
        parts = Parts(self._part_bytes)
        cursor: Any = None
        exported = 0
        while True:
            listing = Listing(size=self._settings.batch_size, cursor=cursor)
            page = await self._retry(
                record, functools.partial(self._records.list_records, record.owner, collection, listing)
            )
            for stored, key in page.items:
                if not await self._store_parts(record, parts.add(orjson.dumps(record_wire(stored)) + b"\n")):
                    return None
                if parts.size > self._settings.max_export_bytes:
                    raise ExportTooLarge(self._settings.max_export_bytes)
                exported, cursor = exported + 1, key
            if not await self._progress(record, Progress(exported, max(total, exported), EXPORTING)):
                return None
            if not page.has_next:
                break
        if not await self._store_parts(record, parts.rest()):
            return None
        return {
            "exported": exported,
            "bytes": parts.size,
            "parts": parts.count,
            "uri": EXPORT_TEMPLATE.replace("{execution_id}", record.id),
            "part_uri_template": PART_TEMPLATE.replace("{execution_id}", record.id),
        }

    async def _store_parts(self, record: ExecutionRecord, done: list[tuple[int, bytes]]) -> bool:
        for number, data in done:
            store = functools.partial(self._store.store_part, record.id, number, data, attempt=record.attempts)
            if not await self._retry(record, store):
                return False
        return True

    async def _progress(self, record: ExecutionRecord, progress: Progress) -> bool:
        write = functools.partial(self._store.set_progress, record.id, progress, self._clock(), attempt=record.attempts)
        if not await self._retry(record, write):
            return False
        self._wake(record.id)
        return True

    async def _retry(self, record: ExecutionRecord, call: Callable[[], Awaitable[T]]) -> T:
        return await retrying(call, budget=self._settings.store_retry_seconds, execution_id=record.id)


async def read_export(
    store: ExecutionStore, uri: str, execution_id: str, owner: str, *, max_result_bytes: int
) -> list[Content]:
    """The owner's completed export as one text, when it fits in one answer."""
    record = await store.get(execution_id, owner)
    if record is None or record.kind != "export" or record.status != "completed":
        raise ResourceNotFound(data={"uri": uri})
    result = record.result or {}
    # An export completed before parts existed has one (plugins/executions/store.py, `output_part`).
    size, count = int(result.get("bytes", 0)), int(result.get("parts", 1))
    if size > readable_bytes(max_result_bytes):
        raise _too_large(uri, size, max_result_bytes, count, PART_TEMPLATE.replace("{execution_id}", execution_id))
    text = bytearray()
    for number in range(count):
        data = await store.output_part(execution_id, owner, number)
        if data is None:
            raise ResourceNotFound(data={"uri": uri})  # purged since the first read
        text += data
    return [text_contents(uri, text.decode("utf-8"), NDJSON)]


async def read_part(
    store: ExecutionStore, uri: str, execution_id: str, part: str, owner: str, *, max_result_bytes: int
) -> list[Content]:
    """Part `part` of the owner's completed export."""
    number = part_number(part)
    data = None if number is None else await store.output_part(execution_id, owner, number)
    if data is None:
        raise ResourceNotFound(data={"uri": uri})
    if len(data) > readable_bytes(max_result_bytes):
        # Cut under a larger limit, or an export kept whole before parts existed: export it again.
        raise _too_large(uri, len(data), max_result_bytes, None, None)
    return [text_contents(uri, data.decode("utf-8"), NDJSON)]


def part_number(part: str) -> int | None:
    """A part's number from its URI: a plain decimal (no sign, no leading zero), or None."""
    if not (part.isascii() and part.isdecimal() and len(part) <= 10) or str(int(part)) != part or int(part) >= MAX_PART:
        return None
    return int(part)


def has_part(record: ExecutionRecord, part: str) -> bool:
    """Whether the completed export has part `part` (one before parts existed: part 0 only)."""
    number = part_number(part)
    return number is not None and number < int((record.result or {}).get("parts", 1))


def _too_large(uri: str, size: int, limit: int, parts: int | None, template: str | None) -> InvalidParams:
    data: dict[str, Any] = {"uri": uri, "reason": "too_large", "bytes": size, "max_result_bytes": limit}
    if parts is None or template is None:
        return InvalidParams(
            "Invalid params: this part of the export is larger than one answer may carry (limits.max_result_bytes); "
            "run the export again to have it cut in smaller parts",
            data=data,
        )
    return InvalidParams(
        f"Invalid params: the export is larger than one answer may carry (limits.max_result_bytes); "
        f"read its {parts} parts, {template} with part from 0 to {parts - 1}, and concatenate them",
        data={**data, "parts": parts, "part_uri_template": template},
    )
