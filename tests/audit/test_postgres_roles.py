"""The PostgreSQL roles of docs/audit.md, set up with the SQL written there: the service's role,
granted INSERT and SELECT only on the audit tables, cannot change, delete or unprotect a record; it
runs `aql-mcp audit verify`, and the pruning role runs `aql-mcp audit prune`, neither migrating."""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest

from aql_mcp.audit.verifier import verify
from aql_mcp.audit.writer import AuditTrail
from aql_mcp.store.audit import GENESIS
from tests.support.audit import entry
from tests.support.engines import Backend, backend_for

pytestmark = pytest.mark.anyio
DOC = Path(__file__).parents[2] / "docs" / "audit.md"
OLD = 1_600_000_000.0
REFUSED = (
    "UPDATE audit_records SET outcome = 'refused'",
    "DELETE FROM audit_records",
    "TRUNCATE audit_records",
    "ALTER TABLE audit_records DISABLE TRIGGER audit_records_append_only",
    "DROP TRIGGER audit_records_append_only ON audit_records",
)


@pytest.fixture
async def postgres(postgres_server: str, tmp_path: Path) -> AsyncIterator[Backend]:
    async for opened in backend_for("postgres", tmp_path, postgres_server):
        yield opened


def _blocks(names: dict[str, str]) -> list[str]:
    """The SQL blocks of docs/audit.md "PostgreSQL roles", with these role names for the documented ones."""
    blocks = re.findall(r"```sql\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.DOTALL)
    for documented, name in names.items():
        blocks = [re.sub(rf"\b{documented}\b", name, block) for block in blocks]
    return blocks


def _as(url: str, role: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=f"{role}@{parts.hostname}:{parts.port}"))


def _cli(url: str, *arguments: str) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "AQL_MCP_STORE__URL": url}
    command = [sys.executable, "-m", "aql_mcp.main", "audit", *arguments, "--dev"]
    return subprocess.run(command, env=environ, capture_output=True, text=True, timeout=60, check=False)


async def test_the_documented_roles_keep_the_service_to_inserting_and_let_the_pruner_prune(postgres: Backend) -> None:
    store = await postgres.open()
    trail = AuditTrail(store.audit)
    await trail.append(entry(0, at=OLD))
    await trail.append(entry(1))
    suffix = secrets.token_hex(4)
    roles = {
        "aql_mcp_audit_owner": f"own_{suffix}",
        "aql_mcp_audit_pruner": f"prn_{suffix}",
        "aql_mcp": f"svc_{suffix}",
    }
    service, pruner = roles["aql_mcp"], roles["aql_mcp_audit_pruner"]
    admin = await asyncpg.connect(postgres.url)
    try:
        await admin.execute(f"CREATE ROLE {service} LOGIN")
        for block in _blocks(roles):
            await admin.execute(block)
        own = await asyncpg.connect(_as(postgres.url, service))
        try:
            # What the service writes, it can: a new chain's anchor.
            await own.execute(
                "INSERT INTO audit_checkpoints (chain, seq, hash, reason, recorded_at) "
                "VALUES ($1, 0, $2, 'anchor', $3)",
                "x/2000-01-01",
                GENESIS,
                "2000-01-01T00:00:00.000000Z",
            )
            for sql in REFUSED:
                with pytest.raises(asyncpg.InsufficientPrivilegeError):
                    await own.execute(sql)
        finally:
            await own.close()
        verified = _cli(_as(postgres.url, service), "verify")
        refused = _cli(_as(postgres.url, service), "prune", "--older-than-days", "30")
        pruned = _cli(_as(postgres.url, pruner), "prune", "--older-than-days", "30")
    finally:
        for role in (service, pruner, roles["aql_mcp_audit_owner"]):
            await admin.execute(f"REASSIGN OWNED BY {role} TO postgres; DROP OWNED BY {role}; DROP ROLE {role}")
        await admin.close()
    assert (verified.returncode, verified.stdout.splitlines()[-1]) == (0, "audit verify: 3 chain(s), 2 record(s): ok")
    assert pruned.returncode == 0, pruned.stderr
    assert pruned.stdout.startswith("audit prune: 1 record(s) written before")
    assert refused.returncode == 3
    assert "permission denied for table audit_records" in refused.stdout  # the store's log line
    assert [row.resource_id for row in await store.audit.records()] == ["r1"]
    assert (await verify(store.audit)).ok
