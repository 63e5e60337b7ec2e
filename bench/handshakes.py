"""The session phase: sequential handshakes timed on one keep-alive connection, and the memory
the sessions they open keep.

On a freshly started server, once the CPUs are quiet: a few warm-up handshakes, then RSS and CPU
are read, `count` handshakes (initialize + notifications/initialized) are sent one after another
and the sessions left open, and after a short settle RSS and CPU are read again.
"""

from __future__ import annotations

import math
import statistics
import time
from typing import Any

from client import McpClient
from load import LoadOptions, wait_quiet
from procfs import busy_seconds, cpu_seconds, rss_kib
from targets import Server

WARMUP_HANDSHAKES = 20
# A traced server holds the spans it has not exported yet: up to a batch (512) before its exporter
# sends them, and the memory they took stays with the process. Enough handshakes first (four spans
# each) that this queue has been at its fullest before RSS is read, so the sessions' growth is theirs.
TRACED_WARMUP_HANDSHAKES = 300
SETTLE_SECONDS = 1.0


def session_phase(server: Server, *, count: int, deadline: float, options: LoadOptions) -> dict[str, Any]:
    # Quiet first: an idle keep-alive connection would be closed by uvicorn after 5 s.
    waited = wait_quiet(server.pid, options)
    client = McpClient(server.target.url, headers=server.headers)
    try:
        for _ in range(TRACED_WARMUP_HANDSHAKES if server.target.traced else WARMUP_HANDSHAKES):
            client.handshake()
        rss_before, cpu_before, busy_before = rss_kib(server.pid), cpu_seconds(server.pid), busy_seconds()
        started = time.monotonic()
        times = timed_handshakes(client, count, deadline=started + deadline, stateful=server.target.stateful)
        time.sleep(SETTLE_SECONDS)
        cpu = cpu_seconds(server.pid) - cpu_before
        busy = busy_seconds()[options.server_cpu] - busy_before[options.server_cpu]
        elapsed = time.monotonic() - started
        rss_after = rss_kib(server.pid)
    finally:
        client.close()
    return {
        "handshakes": count,
        "handshake_p50_ms": percentile(times, 50) * 1e3,
        "handshake_p99_ms": percentile(times, 99) * 1e3,
        "handshake_mean_ms": statistics.fmean(times) * 1e3,
        "server_cpu_ms_per_handshake": cpu / count * 1e3,
        "rss_before_kib": rss_before,
        "rss_after_kib": rss_after,
        "kib_per_session": (rss_after - rss_before) / count if server.target.stateful else None,
        "others_on_server_cpu": round(max(0.0, busy - cpu) / elapsed, 3),
        "quiet_wait_s": waited,
    }


def timed_handshakes(client: McpClient, count: int, *, deadline: float, stateful: bool) -> list[float]:
    times = []
    for done in range(count):
        if time.monotonic() > deadline:
            raise RuntimeError(f"deadline: {done} of {count} handshakes done")
        started = time.perf_counter()
        session = client.handshake()
        times.append(time.perf_counter() - started)
        if stateful and not session:
            raise RuntimeError("initialize returned no Mcp-Session-Id")
    return times


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), math.ceil(p / 100 * len(ordered))))
    return ordered[rank - 1]
