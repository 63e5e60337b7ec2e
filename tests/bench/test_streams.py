"""bench/streams.py: the streams the memory rows open against a real `aql-mcp serve` must be the
streams they name (a session's GET stream, a `subscriptions/listen` stream), each open once its
first event came, or the row measures nothing. Memory is the benchmark's business: nothing here
asserts a number of bytes."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.bench import load_bench_module
from tests.support.server import ServerProcess, start_server

streams = load_bench_module("streams")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with start_server(tmp_path_factory.mktemp("bench-streams"), env=streams.SERVER_ENV, plugins=()) as process:
        yield process


def test_the_legacy_row_opens_each_sessions_get_stream(server: ServerProcess) -> None:
    token = server.token(subject="streams-legacy")
    sessions = streams.legacy_sessions(server, token, 4)
    assert len(set(sessions)) == 4
    opener = streams.legacy_opener(server, token, sessions)
    row = asyncio.run(streams.measure(server, streams.LEGACY, "GET", opener, 3, 1))
    assert (row.era, row.streams) == (streams.LEGACY, 3)
    assert row.rss_before_kib > 0
    assert row.rss_after_kib > 0


def test_the_modern_row_opens_listen_streams(server: ServerProcess) -> None:
    opener = streams.modern_opener(server, server.token(subject="streams-modern"))
    row = asyncio.run(streams.measure(server, streams.MODERN, "listen", opener, 3, 1))
    assert (row.era, row.streams) == (streams.MODERN, 3)


def test_a_stream_the_server_does_not_open_fails_the_row(server: ServerProcess) -> None:
    """A GET with a session id the server never gave is 404, not a stream: the row stops."""
    opener = streams.legacy_opener(server, server.token(subject="streams-bad"), ["not-a-session"])
    with pytest.raises(streams.BadStream):
        asyncio.run(streams.open_many(1, opener))


def test_the_table_says_whether_each_row_meets_the_goal(tmp_path: Path) -> None:
    rows = [streams.Row("a", "x", 1000, 1000, 9000), streams.Row("b", "y", 1000, 1000, 10_000)]
    text = streams.table(rows, command="bench/streams.py")
    assert "| 8.0 | yes |" in text
    assert "| 9.0 | no |" in text
    out = tmp_path / "STREAMS.md"
    out.write_text("old\n" + streams.MARKER + "\nkept notes\n")
    streams.write(out, text)
    assert out.read_text().endswith(streams.MARKER + "\nkept notes\n")
    assert "old" not in out.read_text()
