"""The process's limit on open files: raised at start, and the connection cap kept below it."""

from __future__ import annotations

import resource

import structlog

log = structlog.get_logger("aql_mcp.file_limit")
# Linux's default fs.nr_open: no process opens more files than this whatever its limits say.
KERNEL_FILE_LIMIT = 1_048_576


def raise_file_limit() -> int:
    """Raise the soft limit on open files to the hard limit where allowed; the soft limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return KERNEL_FILE_LIMIT
    # An unlimited hard limit is still bounded by the kernel (fs.nr_open).
    target = hard if hard != resource.RLIM_INFINITY else max(soft, KERNEL_FILE_LIMIT)
    if target > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            log.warning("file_limit_not_raised", soft=soft, hard=hard)
    return int(soft)


def fit_connections(configured: int, *, file_limit: int, reserve: int) -> int:
    """The connection cap that leaves `reserve` descriptors for the store, logs and listeners."""
    return max(1, min(configured, file_limit - reserve))
