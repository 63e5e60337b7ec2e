"""The open-file limit: raised at start, and the connection cap kept below it."""

from __future__ import annotations

import resource

from aql_mcp.server.file_limit import fit_connections, raise_file_limit


def test_the_connection_cap_leaves_a_reserve_below_the_file_limit() -> None:
    assert fit_connections(1024, file_limit=20_000, reserve=200) == 1024
    assert fit_connections(1024, file_limit=1024, reserve=200) == 824
    assert fit_connections(1024, file_limit=100, reserve=200) == 1


def test_the_soft_file_limit_is_raised_to_the_hard_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
    try:
        raised = raise_file_limit()
        assert raised == resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        assert raised == (hard if hard != resource.RLIM_INFINITY else 1_048_576)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
