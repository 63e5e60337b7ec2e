"""An execution as a client reads it (MCP-AQL §8.4.3)."""

from __future__ import annotations

from aql_mcp.plugins.executions.store import ExecutionRecord, Progress
from aql_mcp.plugins.executions.wire import execution_wire


def test_the_wire_form_has_the_required_fields_iso_times_and_only_the_optional_ones_it_has() -> None:
    record = ExecutionRecord("exec_1", "alice", "import", "running", 0.0, 1.5, params={"collection": "c"})
    record.progress = Progress(30, 100)
    record.rejected = 2
    record.report = [{"row": 3, "reason": "not a JSON object"}]
    record.started_at = 1.0
    wire = execution_wire(record)
    assert wire["execution_id"] == "exec_1"
    assert wire["status"] == "running"
    assert wire["started_at"] == "1970-01-01T00:00:01.000Z"
    assert wire["progress"] == {"current": 30, "total": 100}
    assert (wire["imported"], wire["rejected"]) == (28, 2)
    assert "finished_at" not in wire
    assert "error" not in wire
    assert "report" not in execution_wire(record, report=False)


def test_an_export_has_no_import_counts() -> None:
    record = ExecutionRecord("exec_2", "alice", "export", "completed", 0.0, 2.0, finished_at=2.0)
    record.result = {"exported": 3}
    wire = execution_wire(record)
    assert "rejected" not in wire
    assert wire["finished_at"] == "1970-01-01T00:00:02.000Z"
    assert wire["result"] == {"exported": 3}
