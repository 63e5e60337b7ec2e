"""What plugins register: tools, prompts, resources, resource templates and skills.

A plugin calls `registry.add_tool(...)` and friends from its `register(registry)`; nothing is
registered by import side effects. The registry knows which plugin added what, so a duplicate
name fails at startup naming both plugins. Listeners hear about changes after startup so the
sessions can send `notifications/*/list_changed`.
"""

from __future__ import annotations

import base64
import inspect
import re
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import SchemaError, ValidationError
from jsonschema.protocols import Validator

from aql_mcp.exceptions import ConfigError
from aql_mcp.protocol.arguments import ArgumentCheck, compile_check
from aql_mcp.protocol.content import Content
from aql_mcp.protocol.content import ToolResult as ToolResult
from aql_mcp.protocol.context import CAPABILITY_OF
from aql_mcp.protocol.param_headers import ParamHeader, declared_headers
from aql_mcp.protocol.skill import Skill

if TYPE_CHECKING:
    from aql_mcp.auth.principal import Principal
    from aql_mcp.protocol.context import Context

TOOL_NAME = re.compile(r"^[a-z][a-z0-9_]{1,63}$")  # corporate §9.1, stricter than MCP
EMPTY_OBJECT_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {},
    "required": [],
    "additionalProperties": False,
}

Kind = Literal["tool", "prompt", "resource", "template", "skill"]


ToolOutput = ToolResult | list[Content] | str
ToolHandler = Callable[[dict[str, Any], "Context"], Awaitable[ToolOutput]]
Completer = Callable[[str, Mapping[str, str]], Awaitable[list[str]]]
PromptHandler = Callable[[dict[str, str], "Context"], Awaitable[list[Content]]]
ResourceReader = Callable[[str, "Context"], Awaitable[list[Content]]]
TemplateReader = Callable[[str, dict[str, str], "Context"], Awaitable[list[Content]]]
# Raises what the template's reader would raise for this caller and URI (ResourceNotFound for a
# resource that is not there or not the caller's) without reading it.
TemplateCheck = Callable[[str, dict[str, str], "Principal | None"], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    description: str
    handler: ToolHandler
    input_schema: Mapping[str, Any] = field(default_factory=lambda: dict(EMPTY_OBJECT_SCHEMA))
    title: str | None = None
    output_schema: Mapping[str, Any] | None = None
    annotations: Mapping[str, Any] | None = None
    deprecated_until: str | None = None
    # Whether a modern request that declares the Tasks extension gets a task instead of waiting for
    # the result: "optional" (a task for such a request, a plain call otherwise) or "required"
    # (-32021 for a request without the extension). None: always a plain call (docs/eras.md, "Tasks").
    task_support: Literal["optional", "required"] | None = None
    # Runs in the request before the task is created, so its questions are `input_required` rounds
    # (MRTR); what it learns it leaves in `ctx.memo`, which the task's handler starts with.
    before_task: Callable[[dict[str, Any], Context], Awaitable[None]] | None = None
    # More text the generated `agent_prompt` shows under the tool, written when the prompt is (the
    # MCP-AQL endpoint tools list their operations with typed parameters; corporate §10.4).
    guide: Callable[[], str] | None = None
    # The client capabilities the handler cannot do without (`elicitation`, `sampling`, `roots`),
    # checked before it runs: a modern request that does not declare one is 400 -32021 before any
    # byte of a progress stream (docs/eras.md, "Asking the client").
    client_capabilities: tuple[str, ...] = ()

    @classmethod
    def from_function(
        cls,
        function: Callable[..., Awaitable[Any]],
        *,
        name: str | None = None,
        description: str | None = None,
        title: str | None = None,
        annotations: Mapping[str, Any] | None = None,
        output_schema: Mapping[str, Any] | None = None,
        deprecated_until: str | None = None,
    ) -> Tool:
        """A tool whose `inputSchema` comes from the typed `async def` function's signature and whose
        handler calls it with validated values (protocol/signatures.py; docs/plugins.md, "Typed tools").

        `name` defaults to the function's name, `description` to its docstring, `output_schema` to
        the schema of its return annotation when that is a pydantic model (what the function
        returns is then validated through that model; a hand-written `output_schema` is not).
        """
        from aql_mcp.protocol.signatures import FunctionTool

        tool_name = name or function.__name__
        handler = FunctionTool(function, tool_name, typed_output=output_schema is None)
        text = description or inspect.getdoc(function)
        if not text:
            raise ConfigError(f"tool {tool_name!r}: a description is required (a docstring or description=)")
        return cls(
            name=tool_name,
            description=text,
            handler=handler,
            input_schema=handler.input_schema,
            title=title,
            output_schema=output_schema if output_schema is not None else handler.output_schema,
            annotations=annotations,
            deprecated_until=deprecated_until,
        )

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "description": with_deprecation(self.description, self.deprecated_until),
            "inputSchema": self.input_schema,
        }
        if self.title:
            out["title"] = self.title
        if self.output_schema is not None:
            out["outputSchema"] = self.output_schema
        if self.annotations:
            out["annotations"] = self.annotations
        return out


@dataclass(frozen=True, slots=True)
class PromptArgument:
    name: str
    description: str = ""
    required: bool = False
    complete: Completer | None = None

    def to_wire(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "required": self.required}


@dataclass(frozen=True, slots=True)
class Prompt:
    name: str
    description: str
    handler: PromptHandler
    arguments: tuple[PromptArgument, ...] = ()
    title: str | None = None
    deprecated_until: str | None = None

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "description": with_deprecation(self.description, self.deprecated_until),
        }
        if self.title:
            out["title"] = self.title
        if self.arguments:
            out["arguments"] = [a.to_wire() for a in self.arguments]
        return out


@dataclass(frozen=True, slots=True)
class Resource:
    uri: str
    name: str
    reader: ResourceReader
    description: str = ""
    mime_type: str | None = None
    title: str | None = None
    deprecated_until: str | None = None

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"uri": self.uri, "name": self.name}
        if self.title:
            out["title"] = self.title
        if self.description or self.deprecated_until:
            out["description"] = with_deprecation(self.description, self.deprecated_until)
        if self.mime_type:
            out["mimeType"] = self.mime_type
        return out


@dataclass(frozen=True, slots=True)
class ResourceTemplate:
    """A URI template (RFC 6570 level 1: `{name}` expands to one path segment)."""

    uri_template: str
    name: str
    reader: TemplateReader
    description: str = ""
    mime_type: str | None = None
    title: str | None = None
    complete: Mapping[str, Completer] = field(default_factory=dict)
    # Whether the caller may read one URI of the template: resources/read, resources/subscribe and
    # subscriptions/listen all pass it first (protocol/resources.py `readable`), so none of them
    # accepts a URI the others refuse. None: every URI the template matches is readable.
    check: TemplateCheck | None = None

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"uriTemplate": self.uri_template, "name": self.name}
        if self.title:
            out["title"] = self.title
        if self.description:
            out["description"] = self.description
        if self.mime_type:
            out["mimeType"] = self.mime_type
        return out

    def pattern(self) -> re.Pattern[str]:
        parts = re.split(r"\{([a-zA-Z_][a-zA-Z0-9_]*)\}", self.uri_template)
        regex = "".join(f"(?P<{part}>[^/?#]+)" if index % 2 else re.escape(part) for index, part in enumerate(parts))
        return re.compile(regex)


def with_deprecation(description: str, deadline: str | None) -> str:
    """The corporate §17.2 prefix on what is deprecated: `[DEPRECATED until <deadline>] ...`."""
    return f"[DEPRECATED until {deadline}] {description}" if deadline else description


@dataclass(frozen=True, slots=True)
class RegisteredTool:
    tool: Tool
    validator: Validator
    check: ArgumentCheck | None = None
    headers: tuple[ParamHeader, ...] = ()
    # The handler checks the arguments against the schema itself and answers violations in its
    # own result shape (the MCP-AQL endpoint tools: an envelope with an MCP-AQL code).
    self_checking: bool = False

    def first_error(self, arguments: dict[str, Any]) -> ValidationError | None:
        """The first schema violation of `arguments`, or None; the plain check spares jsonschema
        the common valid call, and jsonschema words every error."""
        if self.self_checking or (self.check is not None and self.check(arguments)):
            return None
        return next(iter(self.validator.iter_errors(arguments)), None)


class Registry:
    """Tools, prompts and resources by name, each remembered with the plugin that added it."""

    def __init__(self) -> None:
        self._tools: dict[str, RegisteredTool] = {}
        self._prompts: dict[str, Prompt] = {}
        self._resources: dict[str, Resource] = {}
        self._templates: dict[str, tuple[ResourceTemplate, re.Pattern[str]]] = {}
        self._skills: dict[str, Skill] = {}
        self._skill_files: dict[str, Resource] = {}
        self._owners: dict[tuple[Kind, str], str] = {}
        self._listeners: list[Callable[[Kind], None]] = []
        self.plugin = "core"

    def add_tool(self, tool: Tool, *, self_checking: bool = False) -> None:
        """Register `tool`; `self_checking` (for the MCP-AQL endpoint tools) leaves the arguments
        to the handler, which answers violations of the schema in its own result shape."""
        if not TOOL_NAME.fullmatch(tool.name):
            raise ConfigError(f"plugin {self.plugin}: tool name {tool.name!r} must match {TOOL_NAME.pattern}")
        unknown = sorted(set(tool.client_capabilities) - set(CAPABILITY_OF.values()))
        if unknown:
            raise ConfigError(f"plugin {self.plugin}: tool {tool.name!r} needs unknown client capabilities {unknown}")
        self._claim("tool", tool.name)
        validator = _compile(tool)
        headers = declared_headers(tool.name, tool.input_schema)
        self._tools[tool.name] = RegisteredTool(tool, validator, compile_check(validator), headers, self_checking)
        self._changed("tool")

    def add_prompt(self, prompt: Prompt) -> None:
        self._claim("prompt", prompt.name)
        self._prompts[prompt.name] = prompt
        self._changed("prompt")

    def add_resource(self, resource: Resource) -> None:
        self._claim("resource", resource.uri)
        self._resources[resource.uri] = resource
        self._changed("resource")

    def add_resource_template(self, template: ResourceTemplate) -> None:
        self._claim("template", template.uri_template)
        self._templates[template.uri_template] = (template, template.pattern())
        self._changed("resource")

    def add_skill(self, skill: Skill) -> None:
        """Register `skill` (Skills extension, docs/discovery.md): each of its files becomes a resource
        under `skill://`, read like any other but listed by `skills/list` rather than `resources/list`
        (SEP-2640 lets a skill be read whether or not it is enumerated)."""
        self._claim("skill", skill.uri)
        (uri, mime_type, data), *supporting = skill.contents()
        # SEP-2640 "Resource Metadata": SKILL.md is named and described from its frontmatter.
        description = str(skill.frontmatter["description"])
        files = [Resource(uri, skill.name, _skill_reader(data, mime_type), description, mime_type)]
        files.extend(Resource(u, _file_name(u), _skill_reader(d, m), mime_type=m) for u, m, d in supporting)
        for file in files:
            self._claim("resource", file.uri)
            self._skill_files[file.uri] = file
        self._skills[skill.uri] = skill

    def remove_tool(self, name: str) -> None:
        if self._tools.pop(name, None) is not None:
            self._owners.pop(("tool", name), None)
            self._changed("tool")

    def remove_prompt(self, name: str) -> None:
        if self._prompts.pop(name, None) is not None:
            self._owners.pop(("prompt", name), None)
            self._changed("prompt")

    def on_change(self, listener: Callable[[Kind], None]) -> None:
        self._listeners.append(listener)

    def tools(self) -> Iterator[Tool]:
        return (entry.tool for entry in self._tools.values())

    def tool(self, name: str) -> RegisteredTool | None:
        return self._tools.get(name)

    def param_headers(self, name: str) -> tuple[ParamHeader, ...]:
        """The `Mcp-Param-*` headers tool `name` declares (none for an unknown tool)."""
        entry = self._tools.get(name)
        return entry.headers if entry is not None else ()

    def prompts(self) -> Iterator[Prompt]:
        return iter(self._prompts.values())

    def prompt(self, name: str) -> Prompt | None:
        return self._prompts.get(name)

    def resources(self) -> Iterator[Resource]:
        return iter(self._resources.values())

    def skills(self) -> Iterator[Skill]:
        return iter(self._skills.values())

    def skill(self, uri: str) -> Skill | None:
        return self._skills.get(uri)

    def templates(self) -> Iterator[ResourceTemplate]:
        return (template for template, _ in self._templates.values())

    def template(self, uri_template: str) -> ResourceTemplate | None:
        entry = self._templates.get(uri_template)
        return entry[0] if entry else None

    def resolve(self, uri: str) -> tuple[Resource | ResourceTemplate, dict[str, str]] | None:
        """The resource or template that serves `uri`, with the template's variables."""
        resource = self._resources.get(uri) or self._skill_files.get(uri)
        if resource is not None:
            return resource, {}
        for template, pattern in self._templates.values():
            match = pattern.fullmatch(uri)
            if match:
                return template, match.groupdict()
        return None

    def _claim(self, kind: Kind, name: str) -> None:
        owner = self._owners.get((kind, name))
        if owner is not None:
            raise ConfigError(f"{kind} {name!r} is registered by plugin {owner} and again by plugin {self.plugin}")
        self._owners[(kind, name)] = self.plugin

    def _changed(self, kind: Kind) -> None:
        for listener in self._listeners:
            listener(kind)


def _file_name(uri: str) -> str:
    return uri.rsplit("/", 1)[-1]


def _skill_reader(data: Callable[[], bytes], mime_type: str) -> ResourceReader:
    """A skill file's reader: text when it is UTF-8 text, else a blob; the bytes are those its
    manifest entry measured (protocol/skill.py)."""

    async def reader(uri: str, ctx: Context) -> list[Content]:
        raw = data()
        if mime_type.startswith("text/") or mime_type == "application/json":
            try:
                return [{"uri": uri, "mimeType": mime_type, "text": raw.decode("utf-8")}]
            except UnicodeDecodeError:
                pass
        return [{"uri": uri, "mimeType": mime_type, "blob": base64.b64encode(raw).decode("ascii")}]

    return reader


def _compile(tool: Tool) -> Validator:
    """Compile the tool's inputSchema once (its `$schema` picks the draft; 2020-12 by default)."""
    cls = validators.validator_for(tool.input_schema, default=Draft202012Validator)
    try:
        cls.check_schema(dict(tool.input_schema))
    except SchemaError as exc:
        raise ConfigError(f"tool {tool.name!r}: inputSchema is not a valid JSON Schema ({exc.message})") from None
    return cls(tool.input_schema)
