"""The `executions` plugin as the service loads it (`aql_mcp.plugins.executions:plugin`): its operations
(operations.py, bound by catalog.py), the export resource templates, the MCP tasks mappings of both
eras, the worker its lifespan runs, and the end of sessions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from aql_mcp.plugin import (
    Content,
    Context,
    Limits,
    Operation,
    PluginOperations,
    Principal,
    Registry,
    ResourceNotFound,
    ResourceTemplate,
    Settings,
    Skill,
    TrustLevel,
    trail_log,
)
from aql_mcp.plugins.executions.audited import AuditedExecutionStore
from aql_mcp.plugins.executions.catalog import catalog
from aql_mcp.plugins.executions.export import EXPORT_TEMPLATE, NDJSON, PART_TEMPLATE
from aql_mcp.plugins.executions.legacy_tasks import (
    TASK_OPERATIONS,
    LegacyTasks,
)
from aql_mcp.plugins.executions.modern_tasks import ExecutionTasks
from aql_mcp.plugins.executions.operations import Executions
from aql_mcp.plugins.executions.tables import TABLES
from aql_mcp.plugins.executions.worker import ExecutionWorker
from aql_mcp.plugins.records.operations import Records
from aql_mcp.plugins.records.store import Quota
from aql_mcp.plugins.records.tables import bound_records


@dataclass
class ExecutionsPlugin:
    """Registers the operations and the export resource template; `start`/`stop` run its worker
    in the service's lifespan."""

    settings: Settings
    name: str = "executions"
    trust: TrustLevel = "community_reviewed"
    executions: Executions | None = field(default=None, repr=False)
    _task_tools: set[str] = field(default_factory=set, repr=False)

    def register(self, registry: Registry) -> None:
        async def read(uri: str, variables: dict[str, str], ctx: Context) -> list[Content]:
            if self.executions is None:
                raise ResourceNotFound(data={"uri": uri})
            return await self.executions.read_export(uri, variables, ctx)

        async def check(uri: str, variables: dict[str, str], principal: Principal | None) -> None:
            if self.executions is None:
                raise ResourceNotFound(data={"uri": uri})
            await self.executions.check_export(uri, variables, principal)

        registry.add_resource_template(
            ResourceTemplate(
                EXPORT_TEMPLATE,
                "records_export",
                read,
                description=(
                    "The NDJSON of a completed execute_export, when it fits in one answer (else read its parts); "
                    "only its owner can read it."
                ),
                mime_type=NDJSON,
                check=check,
            )
        )
        registry.add_resource_template(
            ResourceTemplate(
                PART_TEMPLATE,
                "records_export_part",
                read,
                description=(
                    "Part `part` (from 0 to the export's result.parts - 1) of a completed execute_export's NDJSON; "
                    "the parts concatenated in order are the export. Only its owner can read it."
                ),
                mime_type=NDJSON,
                check=check,
            )
        )

    def task_mapper(self) -> LegacyTasks | None:
        """MCP 2025-11-25 tasks over executions (legacy_tasks.py); none before the operations exist."""
        if self.executions is None:
            return None
        return LegacyTasks(self.executions, task_tools=lambda: self._task_tools)

    def modern_task_mapper(self) -> ExecutionTasks | None:
        """2026-07-28 tasks over executions and agent runs (modern_tasks.py); none before the operations exist."""
        if self.executions is None:
            return None
        return ExecutionTasks(self.executions, task_tools=lambda: self._task_tools)

    def register_operations(self, operations: PluginOperations) -> None:
        settings = operations.settings
        # Executions build on records (docs/plugins.md, "A plugin's own tables"): its facet, through
        # the records plugin's own declaration.
        records = Records(settings, bound_records(operations))
        # Every state change is an audit record (docs/audit.md, kind `execution`).
        audited = AuditedExecutionStore(operations.tables(TABLES), trail_log(operations.store, settings.audit))
        worker = ExecutionWorker(
            audited,
            records.store,
            settings.executions,
            lambda: Quota(settings.records.max_records, settings.records.max_bytes),
            Limits(settings.aql.max_string_length, settings.aql.max_array_elements, settings.aql.max_nesting_depth),
            max_result_bytes=settings.limits.max_result_bytes,
            lease_seconds=settings.store.lease_seconds,
        )
        meter = operations.task_meter
        if meter is not None:
            # On /metrics beside the generic tasks (docs/monitoring.md), `task_kind="execution"`.
            meter.track("execution", lambda: worker.running)
            worker.on_takeover.append(lambda outcome: meter.takeover("execution", outcome))
            audited.on_status.append(lambda status: meter.finished("execution", status))
        self.executions = Executions(settings, records, worker, operations.execution_sources)
        operations_list: list[Operation] = catalog(self.executions)
        for operation in operations_list:
            operations.add(operation)
        # The plugin's usage guide, served as a skill (docs/discovery.md, "Skills").
        operations.add_skill(Skill.from_package("aql_mcp.plugins.executions", "skill"))
        # The MCP-AQL tools that carry the operations a task may run.
        tasked = [op for op in operations_list if op.name in TASK_OPERATIONS]
        self._task_tools = set().union(*(operations.tools_for(op) for op in tasked))

    async def on_session_end(self, session_ids: Sequence[str], now: float) -> None:
        """MCP-AQL §2.3.3: in-progress executions are session-scoped state (docs/executions.md)."""
        if self.executions is not None:
            for session_id in session_ids:
                await self.executions.worker.store.cancel_session(session_id, now)

    async def start(self) -> None:
        if self.executions is not None:
            await self.executions.worker.start()

    async def stop(self) -> None:
        if self.executions is not None:
            await self.executions.worker.stop()


def plugin(settings: Settings) -> ExecutionsPlugin:
    """A plugin of its own for each service built (its worker belongs to that service)."""
    return ExecutionsPlugin(settings)
