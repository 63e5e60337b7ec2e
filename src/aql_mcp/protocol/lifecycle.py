"""The legacy `initialize` handshake, and the client info and capabilities both eras keep.

Versions and eras are decided in `protocol/versions.py` (docs/eras.md); the names are re-exported
here for the callers that negotiate a handshake.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from aql_mcp import __version__
from aql_mcp.exceptions import InvalidParams
from aql_mcp.jsonrpc.nesting import exceeds_depth, may_exceed_depth
from aql_mcp.protocol.skill import EXTENSION as SKILLS_EXTENSION
from aql_mcp.protocol.versions import (
    DEFAULT_HEADER_VERSION,
    LATEST,
    LEGACY_VERSIONS,
    MODERN_VERSIONS,
    PRIMING_SINCE,
    Era,
    era_of,
    is_supported,
)

__all__ = [
    "DEFAULT_HEADER_VERSION",
    "LATEST",
    "LEGACY_VERSIONS",
    "MODERN_VERSIONS",
    "PRIMING_SINCE",
    "Era",
    "era_of",
    "is_supported",
]

# What a session keeps of `clientInfo` (logs and telemetry name the client by it), each cut to a sane
# length; icons, descriptions and URLs are for a client's user interface, not for this server.
KEPT_INFO = ("name", "version", "title")
MAX_INFO_TEXT = 256
# The client capabilities of MCP 2025-11-25 and 2026-07-28 (schema `ClientCapabilities`). A session
# keeps which of them were declared and their first-level flags (`elicitation.form`, `roots.listChanged`):
# the server asks only whether one is present (sampling, elicitation); other names mean nothing here.
KNOWN_CAPABILITIES = ("elicitation", "experimental", "extensions", "roots", "sampling", "tasks")
MAX_FLAGS = 32
MAX_FLAG_NAME = 64


def negotiate(requested: Any) -> str:
    """The version to answer `initialize` with (lifecycle, "Version Negotiation")."""
    return requested if isinstance(requested, str) and is_supported(requested) else LATEST


def capabilities() -> dict[str, Any]:
    """What the server supports, declared truthfully: every method behind these is served. The
    Skills extension is declared in both eras, as its SDKs do (docs/discovery.md, "Skills")."""
    return {
        "tools": {"listChanged": True},
        "prompts": {"listChanged": True},
        "resources": {"subscribe": True, "listChanged": True},
        "logging": {},
        "completions": {},
        "extensions": {SKILLS_EXTENSION: {}},
    }


def initialize_result(*, version: str, name: str, title: str, instructions: str) -> dict[str, Any]:
    return {
        "protocolVersion": version,
        "capabilities": capabilities(),
        "serverInfo": {"name": name, "title": title, "version": __version__},
        "instructions": instructions,
    }


@dataclass(frozen=True, slots=True)
class HandshakeLimits:
    """How large (JSON bytes) and how deep (levels, the object itself being level 1) `clientInfo`
    and `capabilities` may each be: `sessions.max_client_info_bytes` and `max_client_info_depth`."""

    max_bytes: int = 16_384
    max_depth: int = 10


DEFAULT_HANDSHAKE = HandshakeLimits()


def client_info(
    params: dict[str, Any], limits: HandshakeLimits = DEFAULT_HANDSHAKE
) -> tuple[dict[str, Any], dict[str, Any]]:
    """What the session keeps of the client's info and capabilities. Either one malformed or over
    `limits` is -32602 naming it (refused, not cut down: the client learns what to fix); within the
    limits, only what the server uses is kept (`kept_info`, `kept_capabilities`)."""
    info = params.get("clientInfo", {})
    caps = params.get("capabilities", {})
    check_bounds("clientInfo", info, limits)
    check_bounds("capabilities", caps, limits)
    if "protocolVersion" not in params:
        raise InvalidParams(data={"field": "protocolVersion", "reason": "required"})
    return kept_info(info), kept_capabilities(caps)


def check_bounds(field: str, value: Any, limits: HandshakeLimits) -> None:
    if not isinstance(value, dict):
        raise InvalidParams(f"Invalid params: {field} must be an object", data={"field": field, "reason": "type"})
    try:
        encoded = orjson.dumps(value)
    except orjson.JSONEncodeError:
        encoded = None  # orjson writes nothing deeper than 254 levels: far too deep
    # The walk only when the encoding has more brackets than levels allowed (rarely: a client's
    # info and capabilities are a few small objects); it runs once per modern request.
    if encoded is None or (may_exceed_depth(encoded, limits.max_depth) and exceeds_depth(value, limits.max_depth)):
        raise InvalidParams(
            f"Invalid params: {field} nests deeper than {limits.max_depth} levels",
            data={"field": field, "reason": "depth", "limit": limits.max_depth, "unit": "levels"},
        )
    size = len(encoded)
    if size > limits.max_bytes:
        raise InvalidParams(
            f"Invalid params: {field} is larger than {limits.max_bytes} bytes",
            data={"field": field, "reason": "size", "limit": limits.max_bytes, "actual": size, "unit": "bytes"},
        )


def kept_info(info: dict[str, Any]) -> dict[str, Any]:
    """The client's name, version and title, each a string cut to `MAX_INFO_TEXT` characters."""
    return {key: value[:MAX_INFO_TEXT] for key in KEPT_INFO if isinstance(value := info.get(key), str)}


def kept_capabilities(caps: dict[str, Any]) -> dict[str, Any]:
    """The known capabilities declared, each with its first-level flags: a boolean as sent, an
    object as `{}` (its presence is the flag), anything else dropped."""
    kept: dict[str, Any] = {}
    for name in KNOWN_CAPABILITIES:
        if name not in caps:
            continue
        value = caps[name]
        flags = list(value.items())[:MAX_FLAGS] if isinstance(value, dict) else []
        kept[name] = {
            flag[:MAX_FLAG_NAME]: (setting if isinstance(setting, bool) else {})
            for flag, setting in flags
            if isinstance(setting, bool | dict)
        }
    return kept
