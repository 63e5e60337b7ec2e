"""Memory per open stream (issue 25): writes bench/STREAMS.md.

A fresh `aql-mcp serve --dev` per era. For the legacy era (2025-11-25) the sessions are made first
(one handshake each, on one keep-alive connection), so their own memory is not counted; then each
session's GET stream is opened on a connection of its own. For the modern era (2026-07-28) each
stream is a `subscriptions/listen` POST on a connection of its own. A stream counts as open once
its first event arrived (the priming event, the acknowledgement). After `--warm` streams (kept
open), the server's RSS (`VmRSS`) is read, `--streams` more are opened, and after a second's
settling RSS is read again: the growth divided by the streams is what one open stream costs,
connection included. Nothing is sent on the streams while they are measured; they stay open until
the server stops. Memory does not depend on the machine's load the way time does, but the
allocator's arenas make small runs coarse: compare at 1,000 streams.

    .venv/bin/python bench/streams.py                        # 1,000 streams per era, about 30 s
    .venv/bin/python bench/streams.py --streams 200 --output /tmp/streams.md
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.server import ServerProcess, start_server  # noqa: E402

LEGACY = "2025-11-25"
MODERN = "2026-07-28"
CLIENT_INFO = {"name": "bench-streams", "version": "1"}
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
    "io.modelcontextprotocol/clientCapabilities": {},
}
# The caps that would otherwise refuse one caller's thousand sessions and streams; everything else
# at its default (keep-alive comments every 15 s, which the measurement does not wait for).
SERVER_ENV = {
    "AQL_MCP_LOGGING__LEVEL": "warning",
    "AQL_MCP_HTTP__MAX_CONNECTIONS": "8192",
    "AQL_MCP_LIMITS__RATE_PER_SECOND": "100000",
    "AQL_MCP_LIMITS__RATE_BURST": "100000",
    "AQL_MCP_LIMITS__MAX_SESSIONS_PER_PRINCIPAL": "10000",
    "AQL_MCP_STREAMS__MAX_LISTENS": "10000",
    "AQL_MCP_STREAMS__MAX_LISTENS_PER_PRINCIPAL": "10000",
}
OPEN_AT_ONCE = 50  # streams being opened concurrently
SETTLE_SECONDS = 1.0
GOAL_KIB = 8.0
MARKER = "<!-- notes: text below this line is kept when the file is regenerated -->"


class BadStream(Exception):
    """The server did not open the stream as a correct MCP server would."""


@dataclass
class Row:
    era: str
    what: str
    streams: int
    rss_before_kib: int
    rss_after_kib: int

    @property
    def per_stream_kib(self) -> float:
        return (self.rss_after_kib - self.rss_before_kib) / self.streams


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


def request_bytes(method: str, port: int, headers: dict[str, str], body: bytes = b"") -> bytes:
    lines = [f"{method} /mcp HTTP/1.1", f"host: 127.0.0.1:{port}", *(f"{k}: {v}" for k, v in headers.items())]
    if body:
        lines.append(f"content-length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("ascii") + body


class Stream:
    """One open SSE response on a connection of its own, held until `close`."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def open(cls, port: int, request: bytes, first: bytes) -> Stream:
        """Send `request`; the answer must be a 200 SSE stream whose first event holds `first`."""
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(request)
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        if not head.startswith(b"HTTP/1.1 200") or b"text/event-stream" not in head:
            writer.close()
            raise BadStream(f"not an SSE stream: {head[:300]!r}")
        event = await asyncio.wait_for(reader.readuntil(b"\n\n"), 10)
        if first not in event:
            writer.close()
            raise BadStream(f"unexpected first event: {event[:300]!r}")
        return cls(reader, writer)

    def close(self) -> None:
        self.writer.close()


async def open_many(count: int, opener: Callable[[int], Any]) -> list[Stream]:
    """`count` streams, OPEN_AT_ONCE at a time; `opener(i)` opens the i-th."""
    gate = asyncio.Semaphore(OPEN_AT_ONCE)

    async def one(index: int) -> Stream:
        async with gate:
            stream: Stream = await opener(index)
            return stream

    return list(await asyncio.gather(*(one(i) for i in range(count))))


def legacy_sessions(server: ServerProcess, token: str, count: int) -> list[str]:
    """`count` initialized sessions, one handshake after another on one keep-alive connection."""
    import http.client

    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    base = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    base["authorization"] = f"Bearer {token}"
    sessions = []
    try:
        for index in range(count):
            params = {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": CLIENT_INFO}
            body = {"jsonrpc": "2.0", "id": index, "method": "initialize", "params": params}
            connection.request("POST", "/mcp", body=json.dumps(body), headers=base)
            response = connection.getresponse()
            response.read()
            session = response.getheader("mcp-session-id")
            if response.status != 200 or session is None:
                raise BadStream(f"initialize: HTTP {response.status}")
            headers = {**base, "mcp-session-id": session, "mcp-protocol-version": LEGACY}
            notice = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            connection.request("POST", "/mcp", body=json.dumps(notice), headers=headers)
            answered = connection.getresponse()
            answered.read()
            if answered.status != 202:
                raise BadStream(f"notifications/initialized: HTTP {answered.status}")
            sessions.append(session)
    finally:
        connection.close()
    return sessions


def legacy_opener(server: ServerProcess, token: str, sessions: list[str]) -> Callable[[int], Any]:
    def opener(index: int) -> Any:
        headers = {
            "accept": "text/event-stream",
            "authorization": f"Bearer {token}",
            "mcp-session-id": sessions[index],
            "mcp-protocol-version": LEGACY,
        }
        # The priming event (an id and empty data) comes first on a 2025-11-25 session's GET stream.
        return Stream.open(server.port, request_bytes("GET", server.port, headers), b"id: ")

    return opener


def modern_opener(server: ServerProcess, token: str) -> Callable[[int], Any]:
    def opener(index: int) -> Any:
        params = {"notifications": {"toolsListChanged": True}, "_meta": MODERN_META}
        body = json.dumps({"jsonrpc": "2.0", "id": index, "method": "subscriptions/listen", "params": params})
        headers = {
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "authorization": f"Bearer {token}",
            "mcp-protocol-version": MODERN,
            "mcp-method": "subscriptions/listen",
        }
        request = request_bytes("POST", server.port, headers, body.encode())
        return Stream.open(server.port, request, b"notifications/subscriptions/acknowledged")

    return opener


async def measure(
    server: ServerProcess, era: str, what: str, opener: Callable[[int], Any], streams: int, warm: int
) -> Row:
    """`warm` streams, RSS, `streams` more, RSS: one row. The streams are closed at the end."""
    pid = server.process.pid
    held = await open_many(warm, opener)
    await asyncio.sleep(SETTLE_SECONDS)
    before = rss_kib(pid)

    def shifted(index: int) -> Any:
        return opener(warm + index)

    held += await open_many(streams, shifted)
    await asyncio.sleep(SETTLE_SECONDS)
    after = rss_kib(pid)
    if server.process.poll() is not None:
        raise BadStream(f"the server exited: {server.log_text()[-2000:]}")
    for stream in held:
        stream.close()
    return Row(era, what, streams, before, after)


@contextmanager
def served(root: Path, label: str) -> Iterator[ServerProcess]:
    state = root / label
    state.mkdir()
    with start_server(state, env=SERVER_ENV, plugins=()) as server:
        yield server


def run(streams: int, warm: int) -> list[Row]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-streams-") as temp:
        root = Path(temp)
        with served(root, "legacy") as server:
            token = server.token(subject="streams", ttl=3600)
            sessions = legacy_sessions(server, token, warm + streams)
            opener = legacy_opener(server, token, sessions)
            rows.append(asyncio.run(measure(server, LEGACY, "GET stream of a session", opener, streams, warm)))
        with served(root, "modern") as server:
            token = server.token(subject="streams", ttl=3600)
            opener = modern_opener(server, token)
            rows.append(asyncio.run(measure(server, MODERN, "`subscriptions/listen`", opener, streams, warm)))
    return rows


def table(rows: list[Row], *, command: str) -> str:
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "# Memory per open stream",
        "",
        f"Written by `bench/streams.py` ({stamp}): `{command}`. How it is measured: bench/README.md,",
        f'"Stream rows". Goal (issue 25): at most {GOAL_KIB:g} KiB per open stream at 1,000 streams.',
        "",
        "| era | stream | streams | RSS before (KiB) | RSS after (KiB) | per stream (KiB) | goal met |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for row in rows:
        met = "yes" if row.per_stream_kib <= GOAL_KIB else "no"
        lines.append(
            f"| {row.era} | {row.what} | {row.streams:,} | {row.rss_before_kib:,} | {row.rss_after_kib:,} "
            f"| {row.per_stream_kib:.1f} | {met} |"
        )
    return "\n".join(lines) + "\n"


def write(path: Path, text: str) -> None:
    """`text`, keeping what a person wrote below the notes marker of the file it replaces."""
    kept = ""
    if path.exists() and MARKER in (old := path.read_text()):
        kept = old[old.index(MARKER) :]
    path.write_text(text + "\n" + (kept or MARKER + "\n"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--streams", type=int, default=1000, help="streams measured per era")
    parser.add_argument("--warm", type=int, default=50, help="streams opened (and kept) before the first reading")
    parser.add_argument("--output", type=Path, default=ROOT / "bench" / "STREAMS.md")
    args = parser.parse_args()
    started = time.monotonic()
    rows = run(args.streams, args.warm)
    command = " ".join(["bench/streams.py", *sys.argv[1:]])
    text = table(rows, command=command)
    write(args.output, text)
    print(text, end="")
    print(f"streams: {time.monotonic() - started:.0f} s, written to {os.path.relpath(args.output)}")


if __name__ == "__main__":
    main()
