"""The texts of `agent_brief` and `agent_prompt`, written from what the registry serves now.

The brief stays within 2 KB (corporate §10.3): tool summaries are shortened step by step until it
fits. The prompt (§10.4) covers every tool with its parameters, risk and an example call.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from aql_mcp.plugin import Registry, Tool

BRIEF_LIMIT = 2048  # bytes of UTF-8 (corporate §10.3)
SUMMARY_LENGTHS = (160, 100, 60, 30, 0)  # tried in turn until the brief fits
DEPRECATED = re.compile(r"^\s*\[DEPRECATED(?: until ([^\]]+))?\]\s*")  # what deprecated() writes


class GuideFacts(Protocol):
    """What the guide says of the deployment: profile.py's `CorporateProfile`, declared here so that
    the guide does not import the plugin that uses it."""

    @property
    def service(self) -> str: ...
    @property
    def version(self) -> str: ...
    @property
    def issuer(self) -> str: ...
    @property
    def audience(self) -> str: ...
    @property
    def scopes_used(self) -> tuple[str, ...]: ...
    @property
    def brief_override(self) -> str | None: ...
    @property
    def prompt_override(self) -> str | None: ...


class AgentGuide:
    """Writes the brief and the prompt from the registry's current contents."""

    def __init__(self, registry: Registry, profile: GuideFacts) -> None:
        self._registry = registry
        self._profile = profile

    def brief(self) -> str:
        if self._profile.brief_override is not None:
            return self._profile.brief_override
        tools = list(self._registry.tools())
        for length in SUMMARY_LENGTHS:
            candidate = self._brief(tools, length)
            if _size(candidate) <= BRIEF_LIMIT:
                return candidate
        return self._brief_cut(tools)

    def prompt(self) -> str:
        if self._profile.prompt_override is not None:
            return self._profile.prompt_override
        profile = self._profile
        sections = [
            f"# {profile.service} {profile.version}: operating instructions\n\n"
            f"You are connected to the MCP server `{profile.service}`. Use only the tools, prompts and "
            "resources listed here; their names and schemas are the contract. Read a tool's description "
            "and parameters before calling it.",
            self._tools_section(),
            self._prompts_section(),
            self._resources_section(),
            self._security_section(),
            ANSWER_FORMAT,
            self._examples_section(),
        ]
        return "\n\n".join(section for section in sections if section) + "\n"

    def _brief(self, tools: list[Tool], length: int, extra: int = 0) -> str:
        lines = [_brief_line(tool, length) for tool in tools]
        if extra:
            lines.append(f"- ... and {extra} more tools (see the agent_prompt prompt)")
        return self._brief_frame(len(tools) + extra, "\n".join(lines))

    def _brief_cut(self, tools: list[Tool]) -> str:
        """Names only, as many as fit; the rest are counted (a registry with hundreds of tools)."""
        low, high = 0, len(tools)  # the most names that fit lies in [low, high]
        while low < high:
            middle = (low + high + 1) // 2
            fits = _size(self._brief(tools[:middle], 0, len(tools) - middle)) <= BRIEF_LIMIT
            low, high = (middle, high) if fits else (low, middle - 1)
        return self._brief(tools[:low], 0, len(tools) - low)

    def _brief_frame(self, count: int, tool_lines: str) -> str:
        profile = self._profile
        scopes = " ".join(profile.scopes_used) or "none beyond a valid token"
        return (
            f"# {profile.service} {profile.version}\n\n"
            f"Domain: the MCP server `{profile.service}` and its {count} tools:\n{tool_lines or '- (none yet)'}\n\n"
            "Pick it when the task needs what one of these tools does.\n"
            "Do not pick it when no tool here fits, for general knowledge, or to hold secrets.\n"
            f"Constraints: Bearer token from {profile.issuer} (scopes: {scopes}); calls are rate limited "
            "(429, Retry-After); state-changing tools need the user's intent; deprecated tools are marked.\n"
            f"Full instructions: prompt agent_prompt or {profile.service}://agent/prompt.\n"
        )

    def _tools_section(self) -> str:
        tools = list(self._registry.tools())
        if not tools:
            return "## Tools\n\nNo tools are registered yet."
        return "## Tools\n\n" + "\n\n".join(_tool_text(tool) for tool in tools)

    def _prompts_section(self) -> str:
        lines = []
        for prompt in self._registry.prompts():
            arguments = ", ".join(f"`{a.name}`{'' if a.required else '?'}" for a in prompt.arguments)
            suffix = f" Arguments: {arguments}." if arguments else ""
            lines.append(f"- `{prompt.name}`: {_sentence(prompt.description)}{suffix}")
        return "## Prompts (prompts/get)\n\n" + "\n".join(lines)

    def _resources_section(self) -> str:
        registry = self._registry
        lines = [
            f"- `{r.uri}` ({r.mime_type or 'text/plain'}): {r.description or r.name}" for r in registry.resources()
        ]
        lines += [f"- `{t.uri_template}` (template): {t.description or t.name}" for t in registry.templates()]
        return "## Resources (resources/read)\n\n" + "\n".join(lines)

    def _security_section(self) -> str:
        profile = self._profile
        scopes = ", ".join(f"`{s}`" for s in profile.scopes_used) or "no named scopes"
        return (
            "## Security constraints\n\n"
            f"- Every request carries `Authorization: Bearer <token>` issued by {profile.issuer} for the "
            f"audience {profile.audience}; this deployment uses {scopes}. Details: `use://auth`.\n"
            "- Never put passwords, tokens, keys or personal data the task does not need into arguments; "
            "never repeat a token in an answer.\n"
            "- A tool that is not read-only changes state: call it only for a change the user asked for, and "
            "ask first when the tool is destructive or the request is ambiguous.\n"
            "- Descriptions starting `[DEPRECATED until <date>]` still work until that date; prefer a "
            "replacement when one is named.\n"
            "- A refusal for a missing scope (HTTP 403 or an `isError` result naming the scope) will not "
            "pass on retry: tell the user which scope is missing.\n"
            "- HTTP 429 / JSON-RPC -32003: wait the `Retry-After` seconds, then retry once. -32004: the call "
            "timed out; retry only read-only tools.\n"
            "- An `isError: true` result, or an MCP-AQL result with `success: false`, explains what to fix "
            "in the arguments: fix them and retry; a "
            "JSON-RPC -32602 error means an unknown tool or malformed parameters."
        )

    def _examples_section(self) -> str:
        tools = list(self._registry.tools())
        if not tools:
            return ""
        tool = _example_tool(tools)
        call = {"name": tool.name, "arguments": example_arguments(tool.input_schema)}
        request = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call}
        return (
            "## Examples\n\n"
            f"Calling `{tool.name}`:\n\n```json\n{json.dumps(request, ensure_ascii=False)}\n```\n\n"
            f'A good answer after that call: "`{tool.name}` returned <the values that answer the question>", '
            'with ids and values quoted exactly as returned. After an `isError: true` result: "The call to '
            f'`{tool.name}` was refused: <the reason it gave>. I will <the fix> and retry."'
        )


def _example_tool(tools: list[Tool]) -> Tool:
    """The tool of the example call: a read-only one whenever there is one (an example an agent
    copies must not change state), the one whose schema carries an example that works as written
    (JSON Schema `examples`) first among them; else one with placeholder arguments."""
    ranked = sorted(tools, key=lambda t: (_risk(t) != "read-only", _schema_example(t.input_schema) is None))
    return ranked[0]


ANSWER_FORMAT = (
    "## Answer format\n\n"
    "- Base every statement about this service's data on a tool result from this conversation; never "
    "invent records, ids or fields.\n"
    "- Name the tool you called and quote ids and values exactly as returned.\n"
    "- Say plainly when a result was empty or an error, and what you did about it.\n"
    "- When the user asks for data, give it as JSON or a table; otherwise answer in short prose."
)


def _tool_text(tool: Tool) -> str:
    heading = f"### `{tool.name}`" + (f": {tool.title}" if tool.title else "")
    lines = [heading, "", tool.description.strip()]
    risk = _risk(tool)
    if risk:
        # "Annotations", not "Risk": a tool description may state its own risk level (corporate §9.3).
        lines.append(f"\nAnnotations: {risk}.")
    parameters = list(_parameters(tool.input_schema))
    lines.append("\nParameters:\n" + "\n".join(parameters) if parameters else "\nParameters: none.")
    if tool.guide is not None:
        lines.append(tool.guide())
        if _schema_example(tool.input_schema) is None:
            return "\n".join(lines)  # the guide's own examples say more than placeholders would
    arguments = json.dumps(example_arguments(tool.input_schema), ensure_ascii=False)
    lines.append(f"Example arguments: `{arguments}`")
    return "\n".join(lines)


def _parameters(schema: Mapping[str, Any]) -> Iterable[str]:
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return
    defs = _defs(schema)
    required = set(schema.get("required") or ())
    for name, spec in properties.items():
        spec = spec if isinstance(spec, Mapping) else {}
        kind = _type_name(spec, defs)
        need = "required" if name in required else "optional"
        description = f": {spec['description']}" if spec.get("description") else ""
        values = _choices(spec, defs)
        choices = f" One of {json.dumps(values, ensure_ascii=False)}." if values else ""
        yield f"- `{name}` ({kind}, {need}){description}{choices}"


def _defs(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    defs = schema.get("$defs")
    return defs if isinstance(defs, Mapping) else {}


def _resolved(spec: Mapping[str, Any], defs: Mapping[str, Any]) -> Mapping[str, Any]:
    """The spec with a local `$ref` (`#/$defs/<name>`, as pydantic writes enums and models) replaced
    by its definition; the spec's own keywords (its description) win."""
    ref = spec.get("$ref")
    if not isinstance(ref, str) or not ref.startswith("#/$defs/"):
        return spec
    target = defs.get(ref.removeprefix("#/$defs/"))
    if not isinstance(target, Mapping):
        return spec
    return {**target, **{k: v for k, v in spec.items() if k != "$ref"}}


def _members(spec: Mapping[str, Any], defs: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The alternatives of an `anyOf`/`oneOf` (`X | None` is one), each resolved; else the spec."""
    spec = _resolved(spec, defs)
    members = spec.get("anyOf") or spec.get("oneOf")
    if isinstance(members, list) and members:
        return [_resolved(member, defs) for member in members if isinstance(member, Mapping)]
    return [spec]


def _type_name(spec: Mapping[str, Any], defs: Mapping[str, Any] | None = None) -> str:
    """The JSON type of a property as the prompt shows it: `string`, `integer|null`, `array of object`."""
    defs = defs or {}
    names: list[str] = []
    for member in _members(spec, defs):
        name = _single_type(member, defs)
        if name not in names:
            names.append(name)
    return "|".join(names)


def _single_type(spec: Mapping[str, Any], defs: Mapping[str, Any]) -> str:
    kind = spec.get("type")
    if kind is None and isinstance(spec.get("enum"), list):
        kind = sorted({_JSON_NAMES.get(type(v).__name__, "any") for v in spec["enum"]})
    name = "|".join(kind) if isinstance(kind, list) else str(kind or "any")
    items = spec.get("items")
    if name == "array" and isinstance(items, Mapping) and ("type" in items or "$ref" in items or "anyOf" in items):
        return f"array of {_type_name(items, defs)}"
    return name


_JSON_NAMES = {"str": "string", "int": "integer", "float": "number", "bool": "boolean", "NoneType": "null"}


def _choices(spec: Mapping[str, Any], defs: Mapping[str, Any]) -> list[Any]:
    """The allowed values of an enum property, through `$ref` and `X | None`."""
    values: list[Any] = []
    for member in _members(spec, defs):
        found = member.get("enum") if isinstance(member.get("enum"), list) else None
        if found is None and "const" in member and member.get("type") != "null":
            found = [member["const"]]
        values += [value for value in found or () if value not in values]
    return values


def example_arguments(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The schema's first example (JSON Schema `examples`), else arguments for the required
    parameters with placeholder values of the right type."""
    example = _schema_example(schema)
    if example is not None:
        return example
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return {}
    defs = _defs(schema)
    return {
        name: _example_value(name, properties.get(name) or {}, defs)
        for name in schema.get("required") or ()
        if isinstance(name, str)
    }


def _schema_example(schema: Mapping[str, Any]) -> dict[str, Any] | None:
    examples = schema.get("examples")
    if isinstance(examples, list) and examples and isinstance(examples[0], dict):
        return dict(examples[0])
    return None


def _example_value(name: str, spec: Mapping[str, Any], defs: Mapping[str, Any] | None = None) -> Any:
    for key in ("default", "const"):
        if key in spec:
            return spec[key]
    values = _choices(spec, defs or {})
    if values:
        return values[0]
    members = [m for m in _members(spec, defs or {}) if m.get("type") != "null"]
    if members and members[0] is not spec:
        return _example_value(name, members[0], defs)
    kind = spec.get("type")
    kind = kind[0] if isinstance(kind, list) and kind else kind
    placeholders: dict[str, Any] = {"integer": 1, "number": 1.5, "boolean": True, "array": [], "object": {}}
    return placeholders.get(str(kind), f"<{name}>")


def _risk(tool: Tool) -> str:
    """The tool's risk from its annotations (corporate §9.3); empty when it declares none."""
    hints = tool.annotations or {}
    if hints.get("readOnlyHint") is True:
        return "read-only"
    if hints.get("destructiveHint") is True:
        return "destructive"
    if "readOnlyHint" in hints or "destructiveHint" in hints:
        return "changes state"
    return ""


def _brief_line(tool: Tool, length: int) -> str:
    tags = [tag for tag in (_risk(tool), _deprecation(tool.description)) if tag]
    line = f"- `{tool.name}`" + (f" [{', '.join(tags)}]" if tags else "")
    summary = _summary(tool.description, length)
    return f"{line}: {summary}" if summary else line


def _summary(description: str, length: int) -> str:
    if length <= 0:
        return ""
    first = DEPRECATED.sub("", description).strip().split("\n", 1)[0]
    sentence = first.split(". ", 1)[0].rstrip(".")
    return sentence if len(sentence) <= length else sentence[: length - 3].rstrip() + "..."


def _sentence(value: str) -> str:
    value = value.strip()
    return value if not value or value.endswith((".", "!", "?")) else value + "."


def _deprecation(description: str) -> str:
    match = DEPRECATED.match(description)
    if match is None:
        return ""
    return f"deprecated until {match.group(1)}" if match.group(1) else "deprecated"


def _size(value: str) -> int:
    return len(value.encode("utf-8"))
