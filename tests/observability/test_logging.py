"""JSON log lines (corporate §15.2): one object per line, the request's context on every line, no lost lines."""

from __future__ import annotations

import asyncio
import io
import json
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import structlog

from aql_mcp.observability.logging import (
    bind_log_context,
    configure_logging,
    end_log_context,
    info_line,
    start_log_context,
)


class FileLikeStdout(io.TextIOWrapper):
    """stdout as a file: text over a buffered binary writer that only reaches `raw_bytes` when flushed."""

    def __init__(self) -> None:
        self.raw_bytes = io.BytesIO()
        super().__init__(io.BufferedWriter(self.raw_bytes, buffer_size=1 << 16), encoding="utf-8")

    def reached_file(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.raw_bytes.getvalue().decode().splitlines()]


Redirect = Callable[..., FileLikeStdout]


@pytest.fixture
def redirect(monkeypatch: pytest.MonkeyPatch) -> Iterator[Redirect]:
    """Call it first in the test body: pytest sets its own sys.stdout again when the body starts."""

    def to_file(level: str = "info") -> FileLikeStdout:
        fake = FileLikeStdout()
        monkeypatch.setattr(sys, "stdout", fake)
        configure_logging(level=level, console=False)
        return fake

    yield to_file
    # Back to the configuration every other in-process test runs under (tests/conftest.py): a module's
    # logger first used after structlog's defaults would keep them (cache_logger_on_first_use).
    configure_logging(level="info", console=False)


def test_a_line_outside_an_event_loop_reaches_the_file_at_once(redirect: Redirect) -> None:
    stdout = redirect()
    structlog.get_logger("test").info("started", port=8000)
    [line] = stdout.reached_file()
    assert line["event"] == "started"
    assert line["port"] == 8000
    assert line["level"] == "info"
    assert line["timestamp"].endswith("Z")


async def scheduled_callbacks() -> None:
    """Return once the callbacks scheduled so far (the writer's flush) have run: `call_soon` keeps order."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()
    loop.call_soon(done.set_result, None)
    await done


@pytest.mark.anyio
async def test_lines_of_one_loop_iteration_reach_the_file_together_at_its_end(redirect: Redirect) -> None:
    stdout = redirect()
    log = structlog.get_logger("test")
    log.info("first")
    log.info("second")
    assert stdout.reached_file() == []  # one write for both comes at the end of this iteration
    await scheduled_callbacks()
    assert [line["event"] for line in stdout.reached_file()] == ["first", "second"]


@pytest.mark.anyio
async def test_every_line_carries_the_request_context_and_the_next_request_starts_empty(redirect: Redirect) -> None:
    stdout = redirect()
    log = structlog.get_logger("test")
    token = start_log_context(request_id="req-1")
    bind_log_context(session_id="abcd1234")
    log.info("inside", session_id="explicit")
    end_log_context(token)
    log.info("after")
    await scheduled_callbacks()
    inside, after = stdout.reached_file()
    assert inside["request_id"] == "req-1"
    assert inside["session_id"] == "explicit"  # a field the call names wins over the context
    assert "request_id" not in after


def test_values_json_has_no_form_for_still_make_a_json_line(redirect: Redirect) -> None:
    stdout = redirect()
    structlog.get_logger("test").info("odd", huge=2**70, keys={1: "one"}, thing=object())
    [line] = stdout.reached_file()
    assert line["huge"] == 2**70
    assert line["keys"] == {"1": "one"}
    assert line["thing"].startswith("<object object")


def test_lines_below_the_level_are_not_written(redirect: Redirect) -> None:
    stdout = redirect(level="warning")
    structlog.get_logger("test").info("quiet")
    structlog.get_logger("test").warning("loud")
    assert [line["event"] for line in stdout.reached_file()] == ["loud"]


def test_an_info_line_of_every_request_is_the_line_structlog_writes(redirect: Redirect) -> None:
    """`info_line` (the request's and the tool call's lines) builds the line itself: the same
    fields in the same order, the context's fields after the call's, a named field winning."""
    stdout = redirect()
    log = structlog.get_logger("test")
    token = start_log_context(request_id="req-1", session_id="from-context")
    info_line(log, "tool_call", tool="echo", session_id="abcd1234", jsonrpc_id=7)
    log.info("tool_call", tool="echo", session_id="abcd1234", jsonrpc_id=7)
    end_log_context(token)
    fast, generic = stdout.reached_file()
    assert list(fast) == list(generic)
    assert {k: v for k, v in fast.items() if k != "timestamp"} == {k: v for k, v in generic.items() if k != "timestamp"}
    assert fast["session_id"] == "abcd1234"
    assert fast["request_id"] == "req-1"


def test_an_info_line_with_values_orjson_refuses_still_makes_a_json_line(redirect: Redirect) -> None:
    stdout = redirect()
    info_line(structlog.get_logger("test"), "http_request", huge=2**70, keys={1: "one"}, thing=object())
    [line] = stdout.reached_file()
    assert line["huge"] == 2**70
    assert line["keys"] == {"1": "one"}
    assert line["thing"].startswith("<object object")


def test_an_info_line_below_the_level_is_not_written(redirect: Redirect) -> None:
    stdout = redirect(level="warning")
    info_line(structlog.get_logger("test"), "http_request", status=200)
    structlog.get_logger("test").warning("loud")
    assert [line["event"] for line in stdout.reached_file()] == ["loud"]


def test_in_console_mode_an_info_line_goes_through_the_logger(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[str, dict[str, Any]]] = []

    class Logger:
        def info(self, event: str, **fields: Any) -> None:
            seen.append((event, fields))

    configure_logging(level="info", console=True)
    try:
        info_line(Logger(), "http_request", status=200)
    finally:
        configure_logging(level="info", console=False)
    assert seen == [("http_request", {"status": 200})]
