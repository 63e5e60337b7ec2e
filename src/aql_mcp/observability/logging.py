"""Structured logs: JSON lines to stdout, or a console renderer in development mode.

Request context (request id, trace id, session, method) lives in one contextvar: the request-id
middleware starts it empty for every request with `start_log_context`, the layers below add to it
with `bind_log_context`, and every line of that request carries it without passing loggers around.

A JSON line costs a few microseconds and the service writes two per call (the request and the
tool call), so the hot path stays inside structlog: one processor adds the context, level and
timestamp, the line is rendered to bytes and goes to `sys.stdout.buffer` directly, without the
standard library's logging. Lines written in one event-loop iteration are flushed together at the
end of it (one `write` for many lines), so a line reaches the file within that iteration, never
later; outside an event loop every line is flushed at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sys
import time
from collections.abc import Mapping
from contextvars import ContextVar, Token
from typing import Any

import orjson
import structlog
from structlog.typing import EventDict, WrappedLogger

LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}
# Logger method names that are not level names (as structlog's `add_log_level` maps them).
LEVEL_NAMES = {"warn": "warning", "exception": "error"}
# Libraries whose info and debug lines carry URLs (query strings included): warnings only.
QUIET_LOGGERS = ("httpx", "httpcore")

_context: ContextVar[dict[str, Any]] = ContextVar("aql_mcp.log_context", default={})  # noqa: B039 - never mutated


def start_log_context(**values: Any) -> Token[dict[str, Any]]:
    """A new log context for this task and the tasks it starts: only `values`, nothing inherited."""
    return _context.set(values)


def end_log_context(token: Token[dict[str, Any]]) -> None:
    """Back to the context from before `start_log_context` (same task)."""
    _context.reset(token)


def log_context() -> Mapping[str, Any]:
    """The current request's log context (request id, trace id, method, era), to read: the audit
    record takes its correlation ids from it."""
    return _context.get()


def bind_log_context(**values: Any) -> None:
    """Add `values` to the log context of the current request."""
    _context.set({**_context.get(), **values})


def extend_log_context(**values: Any) -> Token[dict[str, Any]]:
    """Add `values` for a part of the request (one MCP request's span ids) until `end_log_context`."""
    return _context.set({**_context.get(), **values})


class LineFields:
    """Processor: what every line carries besides its own fields, in one step (it runs for every line).

    The log context (unless the call names a field itself), `level`, and `timestamp` in ISO 8601
    UTC with microseconds, whose date and time part is built once per second.
    """

    __slots__ = ("_second",)

    def __init__(self) -> None:
        self._second = (-1, "")  # one tuple, replaced whole: a thread never sees half of it

    def __call__(self, _logger: WrappedLogger, name: str, event_dict: EventDict) -> EventDict:
        for key, value in _context.get().items():
            event_dict.setdefault(key, value)
        event_dict["level"] = LEVEL_NAMES.get(name, name)
        event_dict["timestamp"] = self.timestamp()
        return event_dict

    def timestamp(self) -> str:
        now = time.time()
        second, prefix = self._second
        if int(now) != second:
            second = int(now)
            prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
            self._second = (second, prefix)
        return f"{prefix}.{int((now - second) * 1_000_000):06d}Z"


# The fallback for what orjson refuses; built once.
_encode = json.JSONEncoder(default=repr).encode


def render_json(_logger: WrappedLogger, _name: str, event_dict: EventDict) -> bytes:
    """Processor: the line as JSON bytes; a value JSON has no form for is written as its repr."""
    try:
        return orjson.dumps(event_dict, default=repr, option=orjson.OPT_NON_STR_KEYS)
    except TypeError:
        # orjson refuses what the standard encoder takes (an integer beyond 64 bits in a request id).
        return _encode(event_dict).encode("ascii")


def render_json_text(logger: WrappedLogger, name: str, event_dict: EventDict) -> str:
    """`render_json` for the standard library's records, whose formatter wants text: one line format."""
    return render_json(logger, name, event_dict).decode()


class LineWriter:
    """The structlog logger behind every JSON line: bytes to stdout, flushed once per loop iteration.

    `sys.stdout` is looked up per line, as structlog's own PrintLogger does, so a test that swaps
    it (pytest's capsys) sees the lines.
    """

    def __init__(self) -> None:
        self._scheduled: asyncio.AbstractEventLoop | None = None

    def msg(self, message: bytes) -> None:
        self.line(message + b"\n")

    def line(self, line: bytes) -> None:
        """`line`, ending in a newline, written as one."""
        out = sys.stdout
        buffer = getattr(out, "buffer", None)
        if buffer is None:
            out.write(line.decode("utf-8"))
            out.flush()
            return
        # One write per line: the buffer's own lock keeps lines from threads whole.
        buffer.write(line)
        scheduled = self._scheduled
        if scheduled is not None and scheduled.is_running():
            return  # the flush at the end of this iteration takes this line too
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            buffer.flush()
            return
        # A flush scheduled on a loop that has since stopped may never run; this one replaces it.
        self._scheduled = loop
        loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._scheduled = None
        # Nothing to tell if stdout is gone (closed at exit, a broken pipe): the lines are lost either way.
        with contextlib.suppress(ValueError, OSError):
            sys.stdout.flush()

    def __call__(self, *_args: Any) -> LineWriter:
        """As its own logger factory: every logger shares the one writer (and its pending flush)."""
        return self

    debug = info = warning = error = critical = exception = msg


class _JsonLines:
    """What `info_line` needs to write a JSON line itself: set by `configure_logging`."""

    __slots__ = ("fields", "info", "writer")

    def __init__(self, fields: LineFields, writer: LineWriter, *, info: bool) -> None:
        self.fields = fields
        self.writer = writer
        self.info = info


_json_lines: _JsonLines | None = None


def info_line(logger: Any, event: str, **fields: Any) -> None:
    """An info line of every request (the request's own, the tool call's): the line structlog
    writes through `logger`, built in one step. structlog's generic steps for a line (the lazy
    logger proxy, the bound context's copy, the processor loop) cost about as much as building
    and writing it (bench/PROFILE.md). In console mode, the line goes through `logger`."""
    lines = _json_lines
    if lines is None:
        logger.info(event, **fields)
        return
    if not lines.info:
        return
    fields["event"] = event
    lines.fields(None, "info", fields)
    try:
        # Without OPT_NON_STR_KEYS, which takes orjson off its fast path: these lines' keys are names.
        line = orjson.dumps(fields, default=repr, option=orjson.OPT_APPEND_NEWLINE)
    except TypeError:
        line = render_json(None, "info", fields) + b"\n"
    lines.writer.line(line)


def configure_logging(*, level: str, console: bool) -> None:
    """Configure structlog and route the standard library's loggers (uvicorn's) through it."""
    global _json_lines
    numeric = LEVELS[level]
    fields = LineFields()
    shared: list[Any] = [fields]
    renderer: Any
    factory: Any
    if console:
        renderer = structlog.dev.ConsoleRenderer()
        line_renderer, factory = renderer, structlog.PrintLoggerFactory()
    else:
        renderer = render_json_text
        line_renderer, factory = render_json, LineWriter()
    _json_lines = None if console else _JsonLines(fields, factory, info=numeric <= logging.INFO)
    structlog.configure(
        processors=[*shared, structlog.processors.format_exc_info, line_renderer],
        # Lines below the level are dropped before any processor runs (no string building).
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=factory,
        cache_logger_on_first_use=True,
    )
    # The standard library's records (uvicorn's, rare) are rendered as text on the same stdout.
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
            foreign_pre_chain=shared,
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(numeric)
    # The service writes its own request log; uvicorn's access log would carry query strings.
    logging.getLogger("uvicorn.access").disabled = True
    # HTTPX logs every outgoing request with its full URL at info (httpcore its steps at debug): the
    # JWKS and introspection URLs, whose query string could hold a secret. Their failures are
    # logged by the service's own lines (auth/jwks.py, auth/token_introspection.py), host only.
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
