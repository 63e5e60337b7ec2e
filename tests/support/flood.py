"""A connect flood from a process of its own: bare TCP connections to 127.0.0.1, opened one after
another without sending a byte (issue 27, N3).

Its own process, so the flood never holds the test's interpreter lock: a test thread opening
connections beside the probes would delay a probe's request head by up to a switch interval
(5 ms), longer than a small connection table takes to turn over, and measure the client instead of
the server. The flood is bounded: it stops when the test closes its stdin, after `--seconds`, or after
`--limit` connects, whichever comes first, and closes its connections as it goes (it holds the newest
`--hold`). `--rate` paces it (connects per second); without it, it goes as fast as it can.
`--source` is the local address it connects from (any 127.0.0.0/8 address on Linux), to stand for
another client host.

    python -m tests.support.flood PORT --hold N [--rate R] [--source 127.0.0.2]
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

READY = "flooding"


@dataclass
class Flood:
    """What a flood did, known once it has stopped: connections opened, connects that failed."""

    opened: int = 0
    failed: int = 0


@contextmanager
def connect_flood(
    port: int,
    *,
    hold: int,
    rate: float | None = None,
    source: str = "127.0.0.1",
    seconds: float = 60.0,
    limit: int = 1_000_000,
) -> Iterator[Flood]:
    """A flood on `port` for as long as the block runs; it has opened `hold` connections when the
    block begins, and its counts are filled in when the block ends."""
    command = [sys.executable, "-m", "tests.support.flood", str(port), "--hold", str(hold)]
    command += ["--source", source, "--seconds", str(seconds), "--limit", str(limit)]
    command += ["--rate", str(rate)] if rate else []
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    flood = Flood()
    try:
        assert process.stdout.readline().strip() == READY, "the flood did not start"
        yield flood
    finally:
        try:
            out, _ = process.communicate(timeout=30)  # closes its stdin: the signal to stop
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
            raise
    counts = json.loads(out)
    flood.opened, flood.failed = counts["opened"], counts["failed"]


def flood(port: int, *, hold: int, rate: float | None, source: str, seconds: float, limit: int) -> Flood:
    """Open connections until stdin ends, `seconds` pass or `limit` connects were tried."""
    stop, start = threading.Event(), time.monotonic()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    timer = threading.Timer(seconds, stop.set)
    timer.start()
    done, held = Flood(), deque[socket.socket]()
    while not stop.is_set() and done.opened + done.failed < limit:
        if rate is not None:  # pacing, not synchronisation: the i-th connect at i / rate seconds
            stop.wait(start + (done.opened + done.failed) / rate - time.monotonic())
        try:
            held.append(socket.create_connection(("127.0.0.1", port), timeout=1.0, source_address=(source, 0)))
            done.opened += 1
        except OSError:
            done.failed += 1
        if len(held) > hold:
            held.popleft().close()
        if done.opened == hold:
            print(READY, flush=True)
    timer.cancel()
    for sock in held:
        sock.close()
    return done


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="flood")
    parser.add_argument("port", type=int)
    parser.add_argument("--hold", type=int, required=True)
    parser.add_argument("--rate", type=float)
    parser.add_argument("--source", default="127.0.0.1")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--limit", type=int, default=1_000_000)
    args = parser.parse_args(argv)
    done = flood(args.port, hold=args.hold, rate=args.rate, source=args.source, seconds=args.seconds, limit=args.limit)
    print(json.dumps({"opened": done.opened, "failed": done.failed}), flush=True)


if __name__ == "__main__":
    main()
