"""The MCP-AQL surface of one MCP registry: operations, router and the endpoint tools.

The plugin loader creates it when the first plugin with operations loads (with `introspect` and
the protocol types) and hands each such plugin a `PluginOperations` under the plugin's name and
trust level. Every operation added refreshes the endpoint tools, so their descriptions name the
operations they serve.
"""

from __future__ import annotations

from typing import Any

from aql_mcp.audit.writer import dropped_records_counter
from aql_mcp.observability.task_metrics import TaskMeter
from aql_mcp.observability.telemetry import Telemetry, current_call
from aql_mcp.operations.audit import trail_log
from aql_mcp.operations.batch import failed_codes, run_batch
from aql_mcp.operations.cost import cost_of, pay, rate_refusal
from aql_mcp.operations.endpoints import Surface, build_tool, family_of
from aql_mcp.operations.execution_sources import ExecutionSource, ExecutionSources
from aql_mcp.operations.gatekeeper import Gatekeeper, behavior
from aql_mcp.operations.introspection import PROTOCOL_TYPES, SPEC_VERSION, introspect_operation, operations_guide
from aql_mcp.operations.models import Call, Operation, TrustLevel, TypeDef
from aql_mcp.operations.payload import Limits
from aql_mcp.operations.registry import OperationRegistry
from aql_mcp.operations.results import Envelope, to_tool_result
from aql_mcp.operations.router import Router, RouterOptions
from aql_mcp.operations.skill import AgentGuide
from aql_mcp.protocol.context import Context
from aql_mcp.protocol.policy import ScopeRules
from aql_mcp.protocol.primitives import Registry, ToolResult
from aql_mcp.protocol.skill import Skill
from aql_mcp.settings import Settings
from aql_mcp.store.base import Store
from aql_mcp.store.plugin_tables import F, Tables

CORE = "mcp-aql"


class AqlService:
    def __init__(
        self, registry: Registry, settings: Settings, store: Store, telemetry: Telemetry | None = None
    ) -> None:
        aql = settings.aql
        self.settings = settings
        self.store = store
        self.surface = Surface(aql.mode, aql.profile, aql.tool_prefix)
        self.operations = OperationRegistry()
        self.router = Router(
            self.operations,
            self.surface,
            Gatekeeper(store.confirmations, ttl_seconds=aql.confirmation_ttl_seconds),
            trail_log(
                store,
                settings.audit,
                on_drop=dropped_records_counter(telemetry.metrics.registry) if telemetry is not None else None,
            ),
            RouterOptions(
                limits=Limits(aql.max_string_length, aql.max_array_elements, aql.max_nesting_depth),
                max_response_bytes=settings.limits.max_result_bytes,
                confirm_with_elicitation=aql.confirm_with_elicitation,
                scopes=ScopeRules(
                    tools=settings.auth.policy.tools,
                    operations=settings.auth.policy.operations,
                    families=settings.auth.policy.families,
                ),
            ),
            telemetry,
        )
        self._registry = registry
        # Where plugins count the work they run in the background (`PluginOperations.task_meter`).
        self.task_meter = telemetry.metrics.tasks if telemetry is not None else None
        self._tools: set[str] = set()
        # What plugins add to `_protocol.capabilities` (the safety plugin: `execution_safety_loop`).
        self.capabilities: dict[str, Any] = {}
        # Executions kept by plugins (the safety plugin's agent runs) for the lifecycle operations.
        self.execution_sources = ExecutionSources()
        self.operations.on_change(self._refresh)
        for type_def in PROTOCOL_TYPES:
            self.operations.add_type(type_def, plugin=CORE)
        self.operations.add(
            introspect_operation(self.operations, self.surface, self.protocol), plugin=CORE, trust="certified"
        )
        self._add_guide()

    def _add_guide(self) -> None:
        """The MCP-AQL agent guide as a skill of the core's (operations/skill.py)."""
        guide = AgentGuide(self.surface, self.operations, max_batch_size=self.settings.aql.max_batch_size)
        previous, self._registry.plugin = self._registry.plugin, CORE
        try:
            self._registry.add_skill(guide.skill())
        finally:
            self._registry.plugin = previous

    @property
    def registry(self) -> Registry:
        return self._registry

    def for_plugin(self, plugin: str, trust: TrustLevel, declared: TrustLevel | None = None) -> PluginOperations:
        return PluginOperations(self, plugin=plugin, trust=trust, declared=declared or trust)

    def protocol(self) -> dict[str, Any]:
        """`_protocol` of the operations list (MCP-AQL introspection §4.1.1, MCP-AQL §4.7.5, §9.3.3)."""
        aql = self.settings.aql
        return {
            "version": SPEC_VERSION,
            "conformance": "level-2",
            "mode": self.surface.mode,
            "profile": self.surface.profile,
            "families": self.surface.describe_profile(self._served()),
            "capabilities": {
                "batch": True,
                "field_selection": True,
                "pagination": True,
                "warnings": True,
                "confirmation": True,
                "dangerous_operations": True,
                "aggregations": False,
                "computed_fields": False,
                "relationship_queries": False,
                **self.capabilities,
            },
            "limits": {
                "max_request_size": self.settings.http.max_body_bytes,
                "max_response_size": self.settings.limits.max_result_bytes,
                "max_string_length": aql.max_string_length,
                "max_array_elements": aql.max_array_elements,
                "max_nesting_depth": aql.max_nesting_depth,
                "max_batch_size": aql.max_batch_size,
                "default_page_size": aql.default_page_size,
                "max_page_size": aql.max_page_size,
            },
            "concurrency": "resource-locked",
            "supports_etag": True,
            "max_concurrent_requests": self.settings.limits.max_concurrent_calls,
        }

    async def call(self, family: str | None, arguments: dict[str, Any], ctx: Context) -> ToolResult:
        call = Call(principal=ctx.principal, session_id=ctx.session_id, ctx=ctx)
        envelope = self.router.check_payload(arguments)
        if envelope is None:
            envelope = await self._dispatch(family, arguments, call)
        _report(envelope)
        return to_tool_result(envelope, recoverable_as_result=self.settings.aql.recoverable_errors == "result")

    async def _dispatch(self, family: str | None, arguments: dict[str, Any], call: Call) -> Envelope:
        if "operations" in arguments:
            return await run_batch(self.router, family, arguments, call, cap=self.settings.aql.max_batch_size)
        operation = arguments.get("operation")
        refused = rate_refusal(self.router.audit, call, operation if isinstance(operation, str) else "")
        pay([cost_of(self.operations.get, arguments)], "this operation", refused)
        return await self.router.run(family, arguments, call)

    def _served(self) -> set[str]:
        return {family_of(op, self.surface.profile) for op in self.operations.operations()}

    def _refresh(self) -> None:
        """Register every tool again with descriptions naming today's operations."""
        previous, self._registry.plugin = self._registry.plugin, CORE
        try:
            if self.surface.has_families:
                for family in self.surface.families:
                    ops = [op for op in self.operations.operations() if family_of(op, self.surface.profile) == family]
                    self._put(family, ops)
            if self.surface.has_single:
                self._put(None, list(self.operations.operations()))
        finally:
            self._registry.plugin = previous

    def _put(self, family: str | None, operations: list[Operation]) -> None:
        if not operations:
            return
        name = self.surface.tool_name(family)

        async def handler(arguments: dict[str, Any], ctx: Context) -> ToolResult:
            return await self.call(family, arguments, ctx)

        tool = build_tool(
            self.surface,
            family,
            operations,
            handler,
            self._gate,
            lambda: operations_guide(operations, self.operations),
            max_batch_size=self.settings.aql.max_batch_size,
        )
        if name in self._tools:
            self._registry.remove_tool(name)
        # The router answers every argument that breaks the schema with an MCP-AQL code (endpoints.py).
        self._registry.add_tool(tool, self_checking=True)
        self._tools.add(name)

    def _gate(self, operation: Operation) -> str:
        return behavior(operation, self.operations.trust(operation.name))


def _report(envelope: Envelope) -> None:
    """The MCP-AQL error codes on the `tool_call` log line, so an operator reads why a call failed
    without the result: the call's own code, or those of a batch's failed items."""
    record = current_call()
    if record is None:
        return
    if envelope.get("success") is False:
        record.operation_failed(str(envelope["error"]["code"]))
    elif "results" in envelope:
        record.items_failed(failed_codes(envelope))


class PluginOperations:
    """What a plugin holds to add operations and types under its name and trust level, with the
    settings and the store its handlers work with."""

    def __init__(self, service: AqlService, *, plugin: str, trust: TrustLevel, declared: TrustLevel) -> None:
        self.service = service
        self.plugin = plugin
        self.trust = trust
        self.declared = declared
        self.settings = service.settings
        self.store = service.store

    def tables(self, declared: Tables[F]) -> F:
        """The facet of a plugin's own tables, bound to the service's store engine; their migrations
        run when the store opens, before the service serves (docs/store.md, "A plugin's own tables").
        A plugin may name another plugin's declaration to use that plugin's tables."""
        return self.store.tables(declared)

    def tools_for(self, operation: Operation) -> set[str]:
        """The MCP tools that carry `operation` in the configured mode and profile: its family's
        tool, and the single tool where there is one (MCP-AQL endpoint modes)."""
        surface = self.service.surface
        tools = {surface.tool_name(family_of(operation, surface.profile))} if surface.has_families else set()
        return tools | ({surface.tool_name(None)} if surface.has_single else set())

    def add(self, operation: Operation) -> None:
        self.service.operations.add(operation, plugin=self.plugin, trust=self.trust, declared=self.declared)

    def add_type(self, type_def: TypeDef) -> None:
        self.service.operations.add_type(type_def, plugin=self.plugin)

    def add_skill(self, skill: Skill) -> None:
        """A usage guide of this plugin's, served as a skill (Skills extension; docs/discovery.md)."""
        self.service.registry.add_skill(skill)

    @property
    def task_meter(self) -> TaskMeter | None:
        """Where a plugin counts the work it runs in the background on /metrics (live, finished by
        status, taken over; docs/monitoring.md); None when the service keeps no metrics (tests)."""
        return self.service.task_meter

    def add_execution_source(self, source: ExecutionSource) -> None:
        """Executions this plugin keeps, shown and cancelled by the lifecycle operations
        (`get_execution`, `list_executions`, `cancel_execution`; docs/executions.md, "Agent runs")."""
        self.service.execution_sources.add(source)

    @property
    def execution_sources(self) -> ExecutionSources:
        """Every plugin's execution sources, read at call time (plugins register in any order)."""
        return self.service.execution_sources
