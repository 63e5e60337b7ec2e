"""The public API for plugin authors: everything a plugin imports comes from here.

A plugin needs nothing else from `aql_mcp`; the modules these names live in are internal and may
change between releases, this module's names may not without a CHANGELOG entry. docs/plugins.md is
the guide ("Writing", "Typed tools", "Testing a plugin"); the README's "Writing a plugin" section
shows them in use.

- MCP-AQL operations (the primary style): `Operation`, `Params`, `Call`, `OperationError` and the
  error codes a handler raises it with (`NOT_FOUND_RESOURCE`, ...), with `Page`, `Outcome` (and
  `warning` for its warnings), `Example`, `Lifecycle`, `Returns` and `TypeDef` for richer
  operations, and `deep_merge` for UPDATE operations (MCP-AQL §4.5). `Principal` is who calls.
- Plain MCP tools, prompts and resources: `Tool` (`Tool.from_function` builds a typed one from an
  `async def`), `ToolResult`, `ToolError`, `Prompt`, `PromptArgument`, `Resource`,
  `ResourceTemplate`, and the handler context `Context`.
- Content helpers: `text`, `image`, `audio`, `text_contents`, `blob_contents`, `embedded`, `message`.
- What a plugin is: `Plugin` (tools, prompts, resources) and `OperationsPlugin` (operations),
  `ConfigurablePlugin` for one with settings of its own (`settings_model` and `configure`, the
  `plugins.<name>` section), and `BackgroundPlugin` for one that runs work of its own while the
  service runs; the objects they are given, `Registry` and `PluginOperations`; and `Settings`, what
  a plugin factory (`module:function`) is called with. A plugin may also serve HTTP routes of its own
  (`RoutesPlugin`, handed `RouteServices`), add lines to the development banner (`BannerPlugin`),
  and run task-augmented MCP 2025-11-25 calls as tasks (`TaskMapperPlugin` returning a `TaskMapper`).
  `ConfigError` is what a factory or `configure` raises to stop startup (and `aql-mcp check-config`)
  with its message and exit code 2, without a traceback.

The test client for plugins is `aql_mcp.testing.client` (docs/plugins.md, "Testing a plugin").
"""

from __future__ import annotations

from aql_mcp.auth.principal import Principal
from aql_mcp.exceptions import ConfigError, ToolError
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
from aql_mcp.operations.results import (
    CONFLICT_ALREADY_EXISTS,
    CONFLICT_VERSION_MISMATCH,
    INTERNAL_ERROR,
    NOT_FOUND_RESOURCE,
    PERMISSION_DENIED,
    RATE_LIMIT_QUOTA_EXHAUSTED,
    VALIDATION_INVALID_TYPE,
    VALIDATION_MISSING_PARAM,
    VALIDATION_UNKNOWN_FIELD,
    OperationError,
    warning,
)
from aql_mcp.operations.service import PluginOperations
from aql_mcp.plugin_host.contracts import (
    BackgroundPlugin,
    BannerPlugin,
    ConfigurablePlugin,
    OperationsPlugin,
    Plugin,
    RouteServices,
    RoutesPlugin,
    TaskMapperPlugin,
)
from aql_mcp.protocol.content import Content, audio, blob_contents, embedded, image, message, text, text_contents
from aql_mcp.protocol.context import Context
from aql_mcp.protocol.primitives import Prompt, PromptArgument, Registry, Resource, ResourceTemplate, Tool, ToolResult
from aql_mcp.protocol.task_mapping import TaskMapper
from aql_mcp.settings import Settings

__all__ = [
    "CONFLICT_ALREADY_EXISTS",
    "CONFLICT_VERSION_MISMATCH",
    "INTERNAL_ERROR",
    "NOT_FOUND_RESOURCE",
    "PERMISSION_DENIED",
    "RATE_LIMIT_QUOTA_EXHAUSTED",
    "VALIDATION_INVALID_TYPE",
    "VALIDATION_MISSING_PARAM",
    "VALIDATION_UNKNOWN_FIELD",
    "BackgroundPlugin",
    "BannerPlugin",
    "Call",
    "Category",
    "ConfigError",
    "ConfigurablePlugin",
    "Content",
    "Context",
    "DangerLevel",
    "Example",
    "Lifecycle",
    "NoParams",
    "Operation",
    "OperationError",
    "OperationsPlugin",
    "Outcome",
    "Page",
    "Params",
    "Plugin",
    "PluginOperations",
    "Principal",
    "Prompt",
    "PromptArgument",
    "Registry",
    "Resource",
    "ResourceTemplate",
    "Returns",
    "RouteServices",
    "RoutesPlugin",
    "Settings",
    "TaskMapper",
    "TaskMapperPlugin",
    "Tool",
    "ToolError",
    "ToolResult",
    "TrustLevel",
    "TypeDef",
    "audio",
    "blob_contents",
    "deep_merge",
    "embedded",
    "image",
    "message",
    "text",
    "text_contents",
    "warning",
]
