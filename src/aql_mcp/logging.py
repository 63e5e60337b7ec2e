"""Structured logs: JSON lines to stdout, or a console renderer in development mode.

Request context (request id, session, method) is bound in a contextvar by the request-id
middleware, so every line of one request carries it without passing loggers around.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import structlog

LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


def configure_logging(*, level: str, console: bool) -> None:
    """Configure structlog and route the standard library's loggers (uvicorn's) through it."""
    numeric = LEVELS[level]
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: Any = structlog.dev.ConsoleRenderer() if console else structlog.processors.JSONRenderer()
    structlog.configure(
        processors=[*shared, structlog.processors.format_exc_info, renderer],
        # Lines below the level are dropped before any processor runs (no string building).
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(sys.stdout),
        cache_logger_on_first_use=True,
    )
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
