"""An export written in parts and read in parts (plugins/executions/export.py; docs/executions.md,
"Exports"): the cutting of NDJSON into parts, and reads bounded by `limits.max_result_bytes` on
every engine."""

from __future__ import annotations

import time

import orjson
import pytest

from aql_mcp.exceptions import InvalidParams, ResourceNotFound
from aql_mcp.plugins.executions.export import Parts, read_export, read_part, readable_bytes
from aql_mcp.plugins.executions.store import ExecutionRecord
from aql_mcp.store.base import Store

pytestmark = pytest.mark.anyio
URI = "records://exports/exp"


def test_parts_hold_whole_lines_and_concatenate_to_the_ndjson() -> None:
    parts = Parts(10)
    lines = [b"aaaa\n", b"bbbb\n", b"cc\n", b"dddddd\n", b"e\n"]
    cut = [part for line in lines for part in parts.add(line)] + parts.rest()
    assert cut == [(0, b"aaaa\nbbbb\n"), (1, b"cc\ndddddd\n"), (2, b"e\n")]
    assert (parts.count, parts.size) == (3, sum(map(len, lines)))


def test_a_line_longer_than_a_part_is_cut_at_character_boundaries() -> None:
    parts = Parts(5)
    line = ("é" * 7 + "\n").encode()  # two bytes a character
    cut = parts.add(line) + parts.rest()
    assert all(len(data) <= 5 for _, data in cut)
    assert b"".join(data for _, data in cut) == line
    assert [data.decode() for _, data in cut]  # every part is valid UTF-8 on its own


def test_what_one_read_carries_fits_the_limit_even_doubled_by_json_escapes() -> None:
    text = ('"\\' * 10_000)[: readable_bytes(65_536)]
    body = orjson.dumps({"jsonrpc": "2.0", "id": 1, "result": {"contents": [{"uri": URI * 4, "text": text}]}})
    assert len(body) <= 65_536


async def _completed_export(store: Store, parts: list[bytes]) -> None:
    now = time.time()
    record = ExecutionRecord("exp", "alice", "export", "pending", now, now, params={"collection": "c"})
    assert await store.executions.create(record, None, max_live_per_owner=5)
    started = await store.executions.start("exp", now)
    assert started is not None
    for number, data in enumerate(parts):
        assert await store.executions.store_part("exp", number, data, attempt=started.attempts)
    result = {"exported": len(parts), "bytes": sum(map(len, parts)), "parts": len(parts), "uri": URI}
    assert await store.executions.transition("exp", "completed", now, result=result, attempt=started.attempts)


async def test_an_export_that_fits_one_answer_is_read_whole(store: Store) -> None:
    await _completed_export(store, [b'{"n":1}\n', b'{"n":2}\n'])
    contents = await read_export(store.executions, URI, "exp", "alice", max_result_bytes=4096)
    assert contents == [{"uri": URI, "mimeType": "application/x-ndjson", "text": '{"n":1}\n{"n":2}\n'}]


async def test_an_export_over_one_answer_is_refused_whole_and_read_in_bounded_parts(store: Store) -> None:
    limit = 2048
    part = b"x" * (readable_bytes(limit) - 1) + b"\n"
    await _completed_export(store, [part, part, b"y\n"])
    with pytest.raises(InvalidParams) as refused:
        await read_export(store.executions, URI, "exp", "alice", max_result_bytes=limit)
    assert refused.value.data is not None
    assert refused.value.data["reason"] == "too_large"
    assert (refused.value.data["parts"], refused.value.data["max_result_bytes"]) == (3, limit)
    assert refused.value.data["part_uri_template"] == "records://exports/exp/parts/{part}"
    texts = [
        (await read_part(store.executions, f"{URI}/parts/{n}", "exp", str(n), "alice", max_result_bytes=limit))[0]
        for n in range(3)
    ]
    assert "".join(t["text"] for t in texts) == (part * 2 + b"y\n").decode()


@pytest.mark.parametrize("part", ["3", "01", "-1", "1e2", "٣", "9" * 400])
async def test_a_part_the_export_does_not_have_is_not_found(store: Store, part: str) -> None:
    await _completed_export(store, [b"a\n", b"b\n", b"c\n"])
    with pytest.raises(ResourceNotFound):
        await read_part(store.executions, URI, "exp", part, "alice", max_result_bytes=4096)


async def test_another_tenants_export_and_its_parts_are_not_found(store: Store) -> None:
    await _completed_export(store, [b"a\n"])
    with pytest.raises(ResourceNotFound):
        await read_export(store.executions, URI, "exp", "mallory", max_result_bytes=4096)
    with pytest.raises(ResourceNotFound):
        await read_part(store.executions, URI, "exp", "0", "mallory", max_result_bytes=4096)


async def test_a_part_larger_than_one_answer_is_refused_with_the_limit(store: Store) -> None:
    """Cut under a larger `limits.max_result_bytes` than the replica now has."""
    await _completed_export(store, [b"x" * 5000 + b"\n"])
    with pytest.raises(InvalidParams) as refused:
        await read_part(store.executions, URI, "exp", "0", "alice", max_result_bytes=4096)
    assert refused.value.data is not None
    assert (refused.value.data["reason"], refused.value.data["max_result_bytes"]) == ("too_large", 4096)
