"""Server-sent events as a test reads them off an httpx response."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx


@dataclass(frozen=True)
class Event:
    """One SSE event as sent: `data` is None when the event had no data line at all."""

    id: str | None
    data: str | None
    retry: int | None

    @property
    def message(self) -> dict[str, Any]:
        assert self.data, self
        message: dict[str, Any] = json.loads(self.data)
        return message


async def iter_events(response: httpx.Response) -> AsyncIterator[Event]:
    """Parse an SSE body (HTML Living Standard, "Event stream interpretation"), comments skipped."""
    fields: dict[str, str] = {}
    async for line in response.aiter_lines():
        if not line:
            if fields:
                retry = fields.get("retry")
                yield Event(fields.get("id"), fields.get("data"), int(retry) if retry else None)
            fields = {}
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        fields[name] = f"{fields[name]}\n{value}" if name == "data" and name in fields else value


def answer(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC answer of a POST, whether it came as JSON or as the last message of an SSE stream
    (a handler that logs or reports progress answers on a stream)."""
    if not response.headers.get("content-type", "").startswith("text/event-stream"):
        body: dict[str, Any] = response.json()
        return body
    messages = [
        json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:") and line[5:].strip()
    ]
    return next(m for m in reversed(messages) if "result" in m or "error" in m)
