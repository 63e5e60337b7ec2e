"""src/aql_mcp/endpoint/sse.py: the one place the MCP streams' SSE frames are written (HTML Living Standard,
"Server-sent events", event stream interpretation)."""

from __future__ import annotations

import re
from pathlib import Path

import orjson

from aql_mcp.endpoint.sse import HEADERS, KEEPALIVE, format_event, format_retry

SRC = Path(__file__).resolve().parents[2] / "src" / "aql_mcp"


def parse(frame: bytes) -> list[tuple[str, str]]:
    """The fields of one frame, as a client reads them (comments skipped); it must end with a blank line."""
    assert frame.endswith(b"\n\n"), frame
    lines = frame[:-2].decode("utf-8").split("\n")
    return [tuple(line.split(": ", 1)) for line in lines if not line.startswith(":")]  # type: ignore[misc]


def test_an_event_carries_its_id_then_retry_then_one_data_line() -> None:
    frame = format_event("p1-3", b'{"jsonrpc":"2.0"}', 2500)
    assert parse(frame) == [("id", "p1-3"), ("retry", "2500"), ("data", '{"jsonrpc":"2.0"}')]


def test_an_event_without_id_or_retry_is_its_data_alone() -> None:
    assert parse(format_event(None, b"{}")) == [("data", "{}")]


def test_a_priming_event_has_an_id_and_empty_data() -> None:
    """2025-11-25 Streamable HTTP, "Sending Messages" 6: an id and empty data the client can resume from."""
    assert parse(format_event("g-0", b"", 1000)) == [("id", "g-0"), ("retry", "1000"), ("data", "")]


def test_a_json_message_with_newlines_in_its_strings_stays_one_data_line() -> None:
    data = orjson.dumps({"text": "two\nlines\r\n"})
    assert parse(format_event(None, data)) == [("data", data.decode())]


def test_a_retry_hint_is_no_event_and_may_follow_a_comment() -> None:
    assert parse(format_retry(3000)) == [("retry", "3000")]
    frame = format_retry(3000, comment="shutting down")
    assert frame.startswith(b": shutting down\n")
    assert parse(frame) == [("retry", "3000")]


def test_keepalive_is_a_comment_a_client_ignores() -> None:
    assert KEEPALIVE.startswith(b":")
    assert parse(KEEPALIVE) == []


def test_headers_declare_an_unbuffered_event_stream() -> None:
    headers = dict(HEADERS)
    assert headers[b"content-type"] == b"text/event-stream"
    assert headers[b"x-accel-buffering"] == b"no"
    assert b"no-transform" in headers[b"cache-control"]


def test_no_other_module_frames_sse_by_hand() -> None:
    """The framing is one function: a field written as bytes anywhere else is a second copy."""
    field = re.compile(rb'b"(?::[^"]*\\n)?(?:id|data|retry|event): ')
    copies = [
        path.relative_to(SRC).as_posix()
        for path in SRC.rglob("*.py")
        if path.name != "sse.py" and field.search(path.read_bytes())
    ]
    assert copies == []
