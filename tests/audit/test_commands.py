"""`aql-mcp audit` in process, on SQLite: the time window of `export`, `prune` by age, a refused
time (docs/audit.md)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from aql_mcp.audit.writer import AuditTrail
from aql_mcp.main import main
from aql_mcp.settings import Settings, StoreSettings
from aql_mcp.store.factory import open_store
from tests.support.audit import entry

JAN_1 = 1_767_225_600.0  # 2026-01-01T00:00:00Z
DAY = 86_400.0


def _write(state: Path, *moments: float) -> None:
    async def write() -> None:
        store = open_store(Settings(store=StoreSettings(path=state)))
        await store.open()
        trail = AuditTrail(store.audit)
        for n, moment in enumerate(moments):
            await trail.append(entry(n, at=moment))
        await store.close()

    asyncio.run(write())


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The settings' store, empty."""
    monkeypatch.setenv("AQL_MCP_STORE__PATH", str(tmp_path))
    return tmp_path


def test_export_takes_dates_and_times_in_utc_since_included_until_excluded(
    state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _write(state, *(JAN_1 + n * DAY + DAY / 2 for n in range(3)))  # 2026-01-01, -02, -03 at noon UTC
    assert main(["audit", "export", "--dev", "--since", "2026-01-02", "--until", "2026-01-03T12:00:00Z"]) == 0
    assert [json.loads(line)["resource_id"] for line in capsys.readouterr().out.splitlines()] == ["r1"]
    assert main(["audit", "export", "--dev", "--since", "2026-01-02T13:00:00+01:00"]) == 0
    assert [json.loads(line)["resource_id"] for line in capsys.readouterr().out.splitlines()] == ["r1", "r2"]


def test_export_refuses_a_time_that_is_not_iso_8601(state: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["audit", "export", "--dev", "--since", "yesterday"])
    assert exited.value.code == 2
    assert "not an ISO 8601 date or time" in capsys.readouterr().err


def test_prune_by_age_then_verify_passes(state: Path, capsys: pytest.CaptureFixture[str]) -> None:
    now = time.time()
    _write(state, now - 400 * DAY, now - 3 * DAY, now)
    assert main(["audit", "prune", "--dev"]) == 0  # audit.retention_days: 365
    assert main(["audit", "prune", "--dev", "--older-than-days", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("audit prune: 1 record(s)")
    assert out[1].startswith("audit prune: 1 record(s)")
    assert main(["audit", "verify", "--dev"]) == 0
    assert capsys.readouterr().out.strip() == "audit verify: 3 chain(s), 1 record(s): ok"
