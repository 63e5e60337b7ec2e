"""The public API for plugin authors: everything a plugin imports comes from here.

A plugin needs nothing else from `aql_mcp`; the modules these names live in are internal and may
change between releases, this module's names may not without a CHANGELOG entry. docs/plugins.md is
the guide ("Writing", "Typed tools", "Testing a plugin"); the README's "Writing a plugin" section
shows them in use. The built-in plugins import from here too (docs/architecture.md, "Contracts").

- MCP-AQL operations (the primary style): `Operation`, `Params`, `Call`, `OperationError` and the
  error codes a handler raises it with (`NOT_FOUND_RESOURCE`, ...), with `Page`, `Outcome` (and
  `warning` for its warnings), `Example`, `Lifecycle`, `Returns` and `TypeDef` for richer
  operations, and `deep_merge` for UPDATE operations (MCP-AQL §4.5). `Principal` is who calls
  (`subject_digest` names a subject in logs). `Limits` and `check_payload` hold a value a plugin
  accepts to the service's payload limits; `AuditLog` records a privileged action (`trail_log`
  builds one writing to the store's audit trail, docs/audit.md "Recording a decision"; `AuditQuery`
  and `moment` filter what `AuditLog.find` reads back); `TOKEN_PREFIX`
  and `token_digest` are the gatekeeper's confirmation tokens, for a plugin that confirms them.
- Plain MCP tools, prompts and resources: `Tool` (`Tool.from_function` builds a typed one from an
  `async def`), `ToolResult`, `ToolError`, `Prompt`, `PromptArgument`, `Resource`,
  `ResourceTemplate` (its reader raises `ResourceNotFound` or `InvalidParams`), `with_deprecation`
  for a deprecated one's description, and the handler context `Context`.
- Skills (the Skills extension; docs/discovery.md, "Skills"): a usage guide a plugin serves as a
  skill, `Skill.from_package` (a directory of the plugin's package holding SKILL.md and supporting
  files) or `Skill.of` (written in code, with `SkillFile`s), given to `Registry.add_skill` or
  `PluginOperations.add_skill`.
- Content helpers: `text`, `image`, `audio`, `text_contents`, `blob_contents`, `embedded`, `message`.
- What a plugin is: `Plugin` (tools, prompts, resources) and `OperationsPlugin` (operations),
  `ConfigurablePlugin` for one with settings of its own (`settings_model` and `configure`, the
  `plugins.<name>` section), and `BackgroundPlugin` for one that runs work of its own while the
  service runs (`StoreError` is what a failing store raises to it); the objects they are given,
  `Registry` and `PluginOperations`; and `Settings` (with `LimitSettings`, its `limits` section),
  what a plugin factory (`module:function`) is called with. `ConfigError` is what a factory or
  `configure` raises to stop startup (and `aql-mcp check-config`) with its message and exit code 2,
  without a traceback. A plugin may also serve HTTP routes of its own (`RoutesPlugin`, handed
  `RouteServices`), add lines to the development banner (`BannerPlugin`), and run task-augmented
  MCP 2025-11-25 calls as tasks (`TaskMapperPlugin` returning a `TaskMapper`, whose handlers are
  `TaskHandler`s; `tasks_negotiated` says whether a request's session declared `tasks`, and
  `success`, `failure` and `to_tool_result` build the envelope a task's result carries), and
  answer 2026-07-28 calls with tasks of its own (`ModernTaskMapperPlugin` returning a
  `ModernTaskMapper`; `declares_tasks` says whether a modern request declared the Tasks extension,
  and `PluginOperations.task_status`, a `TaskStatusReporter`, is where it reports each status change
  of such a task for the listen streams that asked for it).
- A plugin's own tables (docs/store.md, "A plugin's own tables"): `Tables` declares them with a
  `Migration` list per engine and a facet factory per engine, given to `PluginOperations.tables`;
  the factories build the facet on `SqliteEngine` (`read`, `scan`, `write`) or `PostgresEngine`
  (`run`, `scan`, `fetch`, `fetchrow`, `fetchval`, `execute`, `replica`): each is the engine's
  surface as a Protocol, so importing it loads neither engine (a SQLite deployment never loads
  asyncpg). `scan` runs a query no index answers apart from the other calls, and raises
  `TurnTimedOut` when no scan slot came in the time it was given (docs/store.md, "Scan slots").
  `SchemaTooNew` is what opening a store refuses with when its tables need a newer release.
- The core's store (`Store`), for a plugin that reads the core's own facets: who a principal key
  stands for (`principals`, a `PrincipalDirectory` of `Identity`) and the tokens the console signed
  out (`revocations`, a `RevocationStore`). A plugin's own rows go in its own tables (above).
- Executions (MCP-AQL §8.4; docs/executions.md, "Agent runs"): every execution id is
  `new_execution_id()` and every `execution_id` parameter accepts `EXECUTION_ID_PATTERN`; a plugin
  that keeps executions of its own adds an `ExecutionSource` (`PluginOperations.add_execution_source`)
  so `get_execution`, `list_executions` (`SourcedExecution`) and `cancel_execution` reach them;
  the executions plugin reads them all (`PluginOperations.execution_sources`, `ExecutionSources`).
  `PluginOperations.task_meter`, a `TaskMeter`, counts the work a plugin runs in the background on
  /metrics (docs/monitoring.md).
- Hooks: a plugin with `on_session_end(session_ids, now)` (`SessionEndPlugin`) hears of sessions
  that ended; one with `housekeeping(now)` (`HousekeepingPlugin`) purges with the core every 30 s.
- HTTP routes of a plugin's own behind the service's authentication (the safety console): the
  verifiers (`TokenVerifier`, `BearerVerifier` with `SigningKey`, `DevIssuer` in development,
  `bearer_credential`, `credential_digest`), `HostMiddleware`, the errors a route raises
  (`WireError` and `AuthError`, `MissingToken`, `InvalidToken`, `InsufficientScope`, `Forbidden`,
  `InvalidRequest`, `PayloadTooLarge`, `UnsupportedMediaType`), `error_object` that answers them, and
  the request's scope keys (`PRINCIPAL_KEY`, `request_id_of`).

The test client for plugins is `aql_mcp.testing.client` (docs/plugins.md, "Testing a plugin").
"""

from __future__ import annotations

from aql_mcp.audit.record import moment
from aql_mcp.auth.dev_issuer import DevIssuer
from aql_mcp.auth.jwks import SigningKey
from aql_mcp.auth.opaque import digest as credential_digest
from aql_mcp.auth.principal import Principal, principal_key, subject_digest, tenant_key
from aql_mcp.auth.tokens import BearerVerifier, TokenVerifier, bearer_credential
from aql_mcp.exceptions import (
    AqlMcpError,
    AuthError,
    ConfigError,
    Forbidden,
    InsufficientScope,
    InvalidParams,
    InvalidRequest,
    InvalidToken,
    MethodNotFound,
    MissingToken,
    PayloadTooLarge,
    ResourceNotFound,
    StoreError,
    ToolError,
    UnsupportedMediaType,
    WireError,
)
from aql_mcp.middleware.host import HostMiddleware
from aql_mcp.observability.task_metrics import TaskMeter
from aql_mcp.operations.audit import AuditLog, trail_log
from aql_mcp.operations.execution_sources import (
    EXECUTION_ID_PATTERN,
    ExecutionSource,
    ExecutionSources,
    SourcedExecution,
    new_execution_id,
)
from aql_mcp.operations.gatekeeper import TOKEN_PREFIX, token_digest
from aql_mcp.operations.merge import deep_merge
from aql_mcp.operations.models import (
    Call,
    Category,
    DangerLevel,
    Example,
    Lifecycle,
    NoParams,
    Operation,
    Outcome,
    Page,
    Params,
    Returns,
    TrustLevel,
    TypeDef,
)
from aql_mcp.operations.payload import Limits, check_payload
from aql_mcp.operations.results import (
    CONFLICT_ALREADY_EXISTS,
    CONFLICT_VERSION_MISMATCH,
    INTERNAL_ERROR,
    NOT_FOUND_RESOURCE,
    PERMISSION_DENIED,
    RATE_LIMIT_EXCEEDED,
    RATE_LIMIT_QUOTA_EXHAUSTED,
    TOKEN_ALREADY_USED,
    TOKEN_EXPIRED,
    TOKEN_INVALID,
    VALIDATION_INVALID_ENCODING,
    VALIDATION_INVALID_TYPE,
    VALIDATION_MISSING_PARAM,
    VALIDATION_PAYLOAD_TOO_LARGE,
    VALIDATION_UNKNOWN_FIELD,
    OperationError,
    failure,
    success,
    to_tool_result,
    warning,
)
from aql_mcp.operations.service import PluginOperations
from aql_mcp.plugin_host.contracts import (
    BackgroundPlugin,
    BannerPlugin,
    ConfigurablePlugin,
    HousekeepingPlugin,
    ModernTaskMapperPlugin,
    OperationsPlugin,
    Plugin,
    RouteServices,
    RoutesPlugin,
    SessionEndPlugin,
    TaskMapperPlugin,
)
from aql_mcp.protocol.content import Content, audio, blob_contents, embedded, image, message, text, text_contents
from aql_mcp.protocol.context import Context
from aql_mcp.protocol.primitives import (
    Prompt,
    PromptArgument,
    Registry,
    Resource,
    ResourceTemplate,
    Tool,
    ToolResult,
    with_deprecation,
)
from aql_mcp.protocol.skill import Skill, SkillFile
from aql_mcp.protocol.task_mapping import (
    ModernTaskMapper,
    TaskHandler,
    TaskMapper,
    TaskStatusReporter,
    declares_tasks,
    tasks_negotiated,
)
from aql_mcp.responses import error_object
from aql_mcp.scope import PRINCIPAL_KEY, request_id_of
from aql_mcp.settings import LimitSettings, Settings
from aql_mcp.store.audit import AuditQuery
from aql_mcp.store.base import Store
from aql_mcp.store.fair_share import TurnTimedOut
from aql_mcp.store.migration import Migration, SchemaTooNew
from aql_mcp.store.plugin_tables import PostgresEngine, SqliteEngine, Tables
from aql_mcp.store.principals import Identity, PrincipalDirectory
from aql_mcp.store.revocations import RevocationStore

__all__ = [
    "CONFLICT_ALREADY_EXISTS",
    "CONFLICT_VERSION_MISMATCH",
    "EXECUTION_ID_PATTERN",
    "INTERNAL_ERROR",
    "NOT_FOUND_RESOURCE",
    "PERMISSION_DENIED",
    "PRINCIPAL_KEY",
    "RATE_LIMIT_EXCEEDED",
    "RATE_LIMIT_QUOTA_EXHAUSTED",
    "TOKEN_ALREADY_USED",
    "TOKEN_EXPIRED",
    "TOKEN_INVALID",
    "TOKEN_PREFIX",
    "VALIDATION_INVALID_ENCODING",
    "VALIDATION_INVALID_TYPE",
    "VALIDATION_MISSING_PARAM",
    "VALIDATION_PAYLOAD_TOO_LARGE",
    "VALIDATION_UNKNOWN_FIELD",
    "AqlMcpError",
    "AuditLog",
    "AuditQuery",
    "AuthError",
    "BackgroundPlugin",
    "BannerPlugin",
    "BearerVerifier",
    "Call",
    "Category",
    "ConfigError",
    "ConfigurablePlugin",
    "Content",
    "Context",
    "DangerLevel",
    "DevIssuer",
    "Example",
    "ExecutionSource",
    "ExecutionSources",
    "Forbidden",
    "HostMiddleware",
    "HousekeepingPlugin",
    "Identity",
    "InsufficientScope",
    "InvalidParams",
    "InvalidRequest",
    "InvalidToken",
    "Lifecycle",
    "LimitSettings",
    "Limits",
    "MethodNotFound",
    "Migration",
    "MissingToken",
    "ModernTaskMapper",
    "ModernTaskMapperPlugin",
    "NoParams",
    "Operation",
    "OperationError",
    "OperationsPlugin",
    "Outcome",
    "Page",
    "Params",
    "PayloadTooLarge",
    "Plugin",
    "PluginOperations",
    "PostgresEngine",
    "Principal",
    "PrincipalDirectory",
    "Prompt",
    "PromptArgument",
    "Registry",
    "Resource",
    "ResourceNotFound",
    "ResourceTemplate",
    "Returns",
    "RevocationStore",
    "RouteServices",
    "RoutesPlugin",
    "SchemaTooNew",
    "SessionEndPlugin",
    "Settings",
    "SigningKey",
    "Skill",
    "SkillFile",
    "SourcedExecution",
    "SqliteEngine",
    "Store",
    "StoreError",
    "Tables",
    "TaskHandler",
    "TaskMapper",
    "TaskMapperPlugin",
    "TaskMeter",
    "TaskStatusReporter",
    "TokenVerifier",
    "Tool",
    "ToolError",
    "ToolResult",
    "TrustLevel",
    "TurnTimedOut",
    "TypeDef",
    "UnsupportedMediaType",
    "WireError",
    "audio",
    "bearer_credential",
    "blob_contents",
    "check_payload",
    "credential_digest",
    "declares_tasks",
    "deep_merge",
    "embedded",
    "error_object",
    "failure",
    "image",
    "message",
    "moment",
    "new_execution_id",
    "principal_key",
    "request_id_of",
    "subject_digest",
    "success",
    "tasks_negotiated",
    "tenant_key",
    "text",
    "text_contents",
    "to_tool_result",
    "token_digest",
    "trail_log",
    "warning",
    "with_deprecation",
]
