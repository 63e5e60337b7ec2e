"""What the benchmark reads from /proc: a process's CPU time and RSS, each CPU's busy time."""

from __future__ import annotations

import os
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """utime + stime of the process (all its threads), in seconds (proc(5), fields 14 and 15)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    # The command name may hold spaces and parentheses: split after its closing one.
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


def busy_seconds() -> dict[int, float]:
    """Busy time (user, nice, system, irq, softirq) of each CPU since boot, in seconds."""
    busy = {}
    for line in Path("/proc/stat").read_text().splitlines():
        name, *values = line.split()
        if name.startswith("cpu") and name[3:].isdigit():
            user, nice, system, _idle, _iowait, irq, softirq = (int(v) for v in values[:7])
            busy[int(name[3:])] = (user + nice + system + irq + softirq) / TICKS
    return busy


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown"
