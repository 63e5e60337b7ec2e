"""The PostgreSQL roles of docs/audit.md, as written there: the service's role, granted INSERT and
SELECT only on the audit tables, cannot change, delete or unprotect a record."""

from __future__ import annotations

import re
import secrets
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest

from aql_mcp.audit.verifier import verify
from aql_mcp.audit.writer import AuditTrail
from aql_mcp.store.audit import GENESIS
from tests.support.audit import entry
from tests.support.engines import Backend, backend_for

pytestmark = pytest.mark.anyio
DOC = Path(__file__).parents[2] / "docs" / "audit.md"


@pytest.fixture
async def postgres(postgres_server: str, tmp_path: Path) -> AsyncIterator[Backend]:
    async for opened in backend_for("postgres", tmp_path, postgres_server):
        yield opened


def _grants(service: str, owner: str) -> str:
    """The SQL block of docs/audit.md "PostgreSQL roles", for these role names."""
    block = DOC.read_text(encoding="utf-8").split("```sql\n", 1)[1].split("```", 1)[0]
    block = re.sub(r"\baql_mcp_audit_owner\b", owner, block)
    return re.sub(r"\baql_mcp\b", service, block)


async def test_the_service_role_of_the_documented_grants_cannot_change_or_delete_records(postgres: Backend) -> None:
    store = await postgres.open()
    await AuditTrail(store.audit).append(entry(0))
    service, owner = f"svc_{secrets.token_hex(4)}", f"own_{secrets.token_hex(4)}"
    admin = await asyncpg.connect(postgres.url)
    try:
        await admin.execute(f"CREATE ROLE {service} LOGIN")
        await admin.execute(_grants(service, owner))
        own = await asyncpg.connect(postgres.url, user=service)
        try:
            # What the service writes, it can: a new chain's anchor.
            await own.execute(
                "INSERT INTO audit_checkpoints (chain, seq, hash, reason, recorded_at) "
                "VALUES ($1, 0, $2, 'anchor', $3)",
                "x/2000-01-01",
                GENESIS,
                "2000-01-01T00:00:00.000000Z",
            )
            for sql in (
                "UPDATE audit_records SET outcome = 'refused'",
                "DELETE FROM audit_records",
                "TRUNCATE audit_records",
                "ALTER TABLE audit_records DISABLE TRIGGER audit_records_append_only",
                "DROP TRIGGER audit_records_append_only ON audit_records",
            ):
                with pytest.raises(asyncpg.InsufficientPrivilegeError):
                    await own.execute(sql)
        finally:
            await own.close()
    finally:
        await admin.execute(f"DROP OWNED BY {service}; DROP ROLE {service}")
        await admin.execute(f"REASSIGN OWNED BY {owner} TO postgres; DROP OWNED BY {owner}; DROP ROLE {owner}")
        await admin.close()
    assert len(await store.audit.records()) == 1
    assert (await verify(store.audit)).ok
