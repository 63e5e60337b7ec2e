"""A throwaway PostgreSQL server for the tests, started by scripts/postgres.sh.

`start_postgres(directory)` creates a fresh cluster in `directory`, starts it on 127.0.0.1 at a free port and
returns the DSN of its empty database `aql_mcp_test` (superuser `postgres`, no password); `stop_postgres` stops
it. The script installs the Debian package `postgresql` when its server binaries are missing (as root), so
`make test` needs nothing started by hand.

AQL_MCP_TEST_POSTGRES_URL: when set, `start_postgres` starts nothing and returns this DSN instead (and
`stop_postgres` stops nothing), to run the tests against a server of your own, e.g.
`AQL_MCP_TEST_POSTGRES_URL=postgresql://me@localhost/aql_test make test`. Tests may create and drop tables in it.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ENVIRONMENT = "AQL_MCP_TEST_POSTGRES_URL"
SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "postgres.sh"
# Installing the package on a fresh machine takes a while; starting an installed server, a few seconds.
START_SECONDS = 600.0
STOP_SECONDS = 60.0


def start_postgres(directory: Path, *, own: bool = False) -> str:
    """The DSN of a running server: AQL_MCP_TEST_POSTGRES_URL, or a new one with its cluster in
    `directory` (always a new one with `own`, for a test that stops and restarts it)."""
    configured = os.environ.get(ENVIRONMENT)
    if configured and not own:
        return configured
    result = subprocess.run(
        [str(SCRIPT), "start", str(directory)],
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        check=True,
        timeout=START_SECONDS,
    )
    lines = result.stdout.strip().splitlines()
    if not lines or not lines[-1].startswith("postgresql://"):
        raise RuntimeError(f"{SCRIPT} start printed no DSN: {result.stdout!r}")
    return lines[-1]


def stop_postgres(directory: Path, *, own: bool = False) -> None:
    """Stop the server `start_postgres(directory)` started; nothing when AQL_MCP_TEST_POSTGRES_URL is set."""
    if os.environ.get(ENVIRONMENT) and not own:
        return
    subprocess.run(
        [str(SCRIPT), "stop", str(directory)],
        stdin=subprocess.DEVNULL,
        check=True,
        timeout=STOP_SECONDS,
    )


async def create_database(server: str, name: str) -> str:
    """A new empty database on the server `server` points at; its DSN."""
    import asyncpg  # type: ignore[import-untyped]

    admin = await asyncpg.connect(server)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    return server.rsplit("/", 1)[0] + "/" + name


async def drop_database(server: str, name: str) -> None:
    import asyncpg

    admin = await asyncpg.connect(server)
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


def pause_postgres(directory: Path) -> None:
    """Stop the server of `directory`, keeping its data; `start_postgres(directory)` brings it back."""
    subprocess.run([str(SCRIPT), "pause", str(directory)], stdin=subprocess.DEVNULL, check=True, timeout=STOP_SECONDS)
