"""The public API for plugin authors: everything a plugin imports comes from here.

A plugin needs nothing else from `aql_mcp`; the modules these names live in are internal and may
change between releases, this module's names may not without a CHANGELOG entry. The README's
"Writing a plugin" section shows them in use.

- MCP-AQL operations (the primary style): `Operation`, `Params`, `Call`, `OperationError`, with
  `Page`, `Outcome`, `Example`, `Lifecycle`, `Returns` and `TypeDef` for richer operations.
- Plain MCP tools, prompts and resources: `Tool`, `ToolResult`, `ToolError`, `Prompt`,
  `PromptArgument`, `Resource`, `ResourceTemplate`, and the handler context `Context`.
- Content helpers: `text`, `image`, `audio`, `text_contents`, `blob_contents`, `embedded`, `message`.
- What a plugin is: `Plugin` (tools, prompts, resources) and `OperationsPlugin` (operations), with
  the objects they are given, `Registry` and `PluginOperations`; `ConfigurablePlugin` for a plugin
  with settings of its own (`settings_model` and `configure`, the `plugins.<name>` section).
"""

from __future__ import annotations

from aql_mcp.auth.principal import Principal
from aql_mcp.content import Content, audio, blob_contents, embedded, image, message, text, text_contents
from aql_mcp.exceptions import ToolError
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
from aql_mcp.operations.results import OperationError
from aql_mcp.operations.service import PluginOperations
from aql_mcp.plugins.base import ConfigurablePlugin, OperationsPlugin, Plugin
from aql_mcp.protocol.context import Context
from aql_mcp.registry import Prompt, PromptArgument, Registry, Resource, ResourceTemplate, Tool, ToolResult

__all__ = [
    "Call",
    "Category",
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
    "Tool",
    "ToolError",
    "ToolResult",
    "TrustLevel",
    "TypeDef",
    "audio",
    "blob_contents",
    "embedded",
    "image",
    "message",
    "text",
    "text_contents",
]
