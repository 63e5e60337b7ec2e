"""Tool parameters mirrored into `Mcp-Param-{Name}` headers (MCP 2026-07-28, SEP-2243).

A tool's `inputSchema` may mark a parameter with `"x-mcp-header": "Region"`; a modern client then
sends its value in the header `Mcp-Param-Region` too, so that a gateway can route on it without
reading the body (2026-07-28 Streamable HTTP, "Custom Headers from Tool Parameters"; server/tools,
"x-mcp-header"). Two checks live here:

- at registration, `declared_headers` refuses an annotation the spec calls invalid ("Schema
  Extension"): a plugin that declares one is a bug, so the pod fails at start (ConfigError);
- on a modern `tools/call`, `check_call_headers` compares each declared header with the argument
  it mirrors and raises `HeaderMismatch` (400, -32020) when they differ, when the header is missing
  for a present value or present for an absent one, or when it is malformed ("Server Behavior for
  Custom Headers", "Server Validation"). A gateway that routed on the header and a server that acts
  on the body must never see two different values.

`decode_header_value` undoes the `=?base64?...?=` sentinel ("Value Encoding") for these headers and
for `Mcp-Name`. The legacy era never looks at `Mcp-Param-*` headers.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from starlette.types import Scope

from aql_mcp.auth.principal import Principal
from aql_mcp.exceptions import ConfigError, HeaderMismatch
from aql_mcp.jsonrpc.messages import Request

ANNOTATION = "x-mcp-header"
HEADER_PREFIX = "Mcp-Param-"
SENTINEL_PREFIX, SENTINEL_SUFFIX = "=?base64?", "?="
# RFC 9110 §5.6.2: token = 1*tchar; no space, colon, control or non-ASCII character fits.
TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
# RFC 9110 §5.5: a field value is visible ASCII, space and tab; anything else needs the sentinel.
FIELD_VALUE = re.compile(r"[\x20-\x7e\t]*")
# The decimal rendering of a number (RFC 8259 §6), compared numerically ("Server Validation" note).
NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
PRIMITIVES = frozenset({"string", "integer", "boolean"})
# Keywords whose value is a map of names to subschemas; only `properties` keeps a parameter
# statically reachable ("Schema Extension": no items, composition, conditionals nor $ref on the way).
SCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"})
# Keywords whose value is data, not a schema: an `x-mcp-header` key inside them is no annotation.
DATA_KEYWORDS = frozenset({"const", "enum", "default", "examples"})
MAX_PREFLIGHT_NAMES = 32


@dataclass(frozen=True, slots=True)
class ParamHeader:
    """One annotated parameter: its place in `arguments` and the header that mirrors it."""

    name: str
    path: tuple[str, ...]

    @property
    def field(self) -> str:
        return f"{HEADER_PREFIX}{self.name}"

    @property
    def key(self) -> bytes:
        return self.field.lower().encode("ascii")


ToolHeaders = Callable[[str], tuple[ParamHeader, ...]]
# The headers a tool declares as one caller sees them: none for a tool it lacks the scopes for.
CallerHeaders = Callable[[str, Principal | None], tuple[ParamHeader, ...]]


# --- registration --------------------------------------------------------------------------------


def declared_headers(tool: str, schema: Mapping[str, Any]) -> tuple[ParamHeader, ...]:
    """The parameters `schema` mirrors into headers; ConfigError naming the tool and the place of
    the first annotation the spec forbids (2026-07-28 Streamable HTTP, "Schema Extension")."""
    found: list[ParamHeader] = []
    _walk(tool, schema, (), True, found)
    seen: dict[str, ParamHeader] = {}
    for param in found:
        other = seen.setdefault(param.name.lower(), param)
        if other is not param:
            raise ConfigError(
                f"tool {tool!r}: x-mcp-header {param.name!r} on {_pointer(param.path)} repeats "
                f"{other.name!r} of {_pointer(other.path)} (names are case-insensitively unique)"
            )
    return tuple(found)


def _walk(
    tool: str, node: Mapping[str, Any], pointer: tuple[str, ...], reachable: bool, found: list[ParamHeader]
) -> None:
    """Visit every subschema; `reachable` holds while the way from the root is `properties` only."""
    if ANNOTATION in node:
        found.append(_annotated(tool, node, pointer, reachable))
    for key, value in node.items():
        if key in DATA_KEYWORDS or key == ANNOTATION:
            continue
        if key in SCHEMA_MAPS and isinstance(value, Mapping):
            for name, sub in value.items():
                if isinstance(sub, Mapping):
                    _walk(tool, sub, (*pointer, key, name), reachable and key == "properties", found)
        elif isinstance(value, Mapping):
            _walk(tool, value, (*pointer, key), False, found)
        elif isinstance(value, list):
            for index, item in enumerate(value):
                if isinstance(item, Mapping):
                    _walk(tool, item, (*pointer, key, str(index)), False, found)


def _annotated(tool: str, node: Mapping[str, Any], pointer: tuple[str, ...], reachable: bool) -> ParamHeader:
    where = "/" + "/".join(pointer)
    if not reachable or not pointer:
        raise ConfigError(
            f"tool {tool!r}: x-mcp-header at {where} is not on a property reached through `properties` alone"
        )
    name = node[ANNOTATION]
    if not isinstance(name, str) or not TOKEN.fullmatch(name):
        raise ConfigError(f"tool {tool!r}: x-mcp-header at {where} must be a non-empty RFC 9110 token, got {name!r}")
    if not _is_primitive(node.get("type")):
        raise ConfigError(f"tool {tool!r}: x-mcp-header at {where} needs `type` string, integer or boolean")
    return ParamHeader(name, pointer[1::2])


def _is_primitive(declared: Any) -> bool:
    """One of string/integer/boolean, alone or beside "null" (a null value sends no header)."""
    if isinstance(declared, str):
        return declared in PRIMITIVES
    if isinstance(declared, list) and all(isinstance(kind, str) for kind in declared):
        kinds = set(declared) - {"null"}
        return len(kinds) == 1 and kinds <= PRIMITIVES and len(declared) == len(set(declared))
    return False


def _pointer(path: tuple[str, ...]) -> str:
    """The JSON Pointer of a parameter in the schema, as the other messages name places."""
    return "".join(f"/properties/{step}" for step in path)


# --- request validation --------------------------------------------------------------------------


def check_call_headers(scope: Scope, request: Request, declared: ToolHeaders) -> None:
    """-32020 unless every header the called tool declares agrees with its argument; other
    methods, unknown tools and undeclared `Mcp-Param-*` headers are not this check's concern."""
    name = request.params.get("name")
    if request.method != "tools/call" or not isinstance(name, str):
        return
    check_param_headers(scope["headers"], declared(name), request.params.get("arguments"))


def check_param_headers(raw: Iterable[tuple[bytes, bytes]], declared: tuple[ParamHeader, ...], arguments: Any) -> None:
    """HeaderMismatch naming the first declared header that does not carry its argument's value
    (2026-07-28 Streamable HTTP, "Server Behavior for Custom Headers")."""
    if not declared:
        return
    headers = list(raw)
    for param in declared:
        sent = [value.decode("latin-1") for key, value in headers if key == param.key]
        if not _agrees(sent, _value_at(arguments, param.path)):
            raise HeaderMismatch(data={"header": param.field})


def _value_at(arguments: Any, path: tuple[str, ...]) -> Any:
    """The instance at the property path, or None when absent ("Schema Extension", extraction)."""
    value = arguments
    for step in path:
        if not isinstance(value, dict):
            return None
        value = value.get(step)
    return value


def _agrees(sent: list[str], value: Any) -> bool:
    """A null or absent value wants no header; a present one exactly one header rendering it. A
    repeated header is refused: a gateway might route on another copy than the one compared."""
    if value is None:
        return not sent
    if len(sent) != 1:
        return False
    text = sent[0].strip(" \t")  # RFC 9110 §5.5: optional whitespace is not part of the value
    if not FIELD_VALUE.fullmatch(text):
        return False
    decoded = decode_header_value(text)
    return decoded is not None and _renders(decoded, value)


def _renders(text: str, value: Any) -> bool:
    """Whether `text` is `value` as the spec renders it ("Value Encoding", type conversion)."""
    if isinstance(value, bool):
        return text == ("true" if value else "false")
    if isinstance(value, str):
        return text == value
    if isinstance(value, int | float):
        return _same_number(text, value)
    return False  # an object or array has no header form; it can never agree


def _same_number(text: str, value: int | float) -> bool:
    """`42`, `42.0` and `4.2e1` all render 42 ("Server Validation": compare numerically)."""
    if not NUMBER.fullmatch(text):
        return False
    # repr() is the shortest text that reads back as the same float, so 0.1 stays 0.1.
    return Decimal(text) == (Decimal(value) if isinstance(value, int) else Decimal(repr(value)))


def decode_header_value(value: str) -> str | None:
    """A mirrored header's value, decoded from `=?base64?...?=` when so sent (strict alphabet and
    padding, UTF-8); None if undecodable. Without both markers the value is literal."""
    if len(value) < len(SENTINEL_PREFIX) + len(SENTINEL_SUFFIX):
        return value
    if not (value.startswith(SENTINEL_PREFIX) and value.endswith(SENTINEL_SUFFIX)):
        return value
    encoded = value[len(SENTINEL_PREFIX) : -len(SENTINEL_SUFFIX)]
    try:
        return base64.b64decode(encoded, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None


# --- CORS ----------------------------------------------------------------------------------------


def requested_param_headers(requested: str | None) -> list[str]:
    """The `Mcp-Param-*` names a preflight asks for (lower-case, tokens only, a bounded few): the
    names vary per tool and may change at run time, and allowing a browser to send one grants
    nothing, since the server checks every declared header against the body anyway."""
    if not requested:
        return []
    prefix = HEADER_PREFIX.lower()
    names = (part.strip().lower() for part in requested.split(","))
    wanted = [name for name in names if name.startswith(prefix) and len(name) > len(prefix) and TOKEN.fullmatch(name)]
    return list(dict.fromkeys(wanted))[:MAX_PREFLIGHT_NAMES]
