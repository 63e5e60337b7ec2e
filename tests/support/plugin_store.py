"""A store as the service opens it with the built-in plugins loaded: their tables declared before it
opens, and their facets beside the core's (`store.records`, `store.executions`, `store.safety`), as
the tests of those plugins reach them. The service itself reaches them only through the plugins."""

from __future__ import annotations

from typing import Any

from aql_mcp.plugins.executions.store import ExecutionStore
from aql_mcp.plugins.executions.tables import TABLES as EXECUTIONS
from aql_mcp.plugins.records.store import RecordStore
from aql_mcp.plugins.records.tables import TABLES as RECORDS
from aql_mcp.plugins.safety.store import SafetyStore
from aql_mcp.plugins.safety.tables import TABLES as SAFETY
from aql_mcp.store.base import Store

BUILT_INS = (RECORDS, EXECUTIONS, SAFETY)


class PluginStore:
    """`store` with the built-ins' facets bound to it; everything else is the store's own."""

    def __init__(self, store: Store, *, scan_rows: int | None = None) -> None:
        self.store = store
        self.records: RecordStore = store.tables(RECORDS)
        if scan_rows is not None:
            self.records.scan_rows = scan_rows
        self.executions: ExecutionStore = store.tables(EXECUTIONS)
        self.safety: SafetyStore = store.tables(SAFETY)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


def with_built_ins(store: Store, *, scan_rows: int | None = None) -> Any:
    """`store` (not yet open) as a test of the built-ins uses it."""
    return PluginStore(store, scan_rows=scan_rows)
