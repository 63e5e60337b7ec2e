"""Protocol versions, the era decision, and the `initialize` handshake.

The era of a request is decided here and nowhere else. The legacy era (2025-03-26 to
2025-11-25: `initialize`, sessions, SSE) is served; the modern era (2026-07-28: no handshake,
per-request `_meta`) is not yet, so a modern request is refused with a plain 400 whose body is no
recognised modern error, which tells a modern client to fall back to `initialize` (2026-07-28
`basic/versioning.mdx`, "Backward Compatibility").
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from aql_mcp import __version__
from aql_mcp.exceptions import InvalidParams

LATEST = "2025-11-25"
LEGACY_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26")
MODERN_VERSIONS = ("2026-07-28",)
# Without a header and no session to tell, assume the oldest Streamable HTTP version (2025-11-25 transports).
DEFAULT_HEADER_VERSION = "2025-03-26"
# 2025-11-25 clients understand the priming event (an id with empty data); older ones may not.
PRIMING_SINCE = "2025-11-25"


class Era(Enum):
    LEGACY = "legacy"
    MODERN = "modern"
    UNKNOWN = "unknown"


def era_of(version: str | None) -> Era:
    """The era a protocol version belongs to; None (no header) is legacy."""
    if version is None or version in LEGACY_VERSIONS:
        return Era.LEGACY
    if version in MODERN_VERSIONS:
        return Era.MODERN
    return Era.UNKNOWN


def is_supported(version: str) -> bool:
    return era_of(version) is Era.LEGACY


def negotiate(requested: Any) -> str:
    """The version to answer `initialize` with (lifecycle, "Version Negotiation")."""
    return requested if isinstance(requested, str) and is_supported(requested) else LATEST


def capabilities() -> dict[str, Any]:
    """What the server supports, declared truthfully: every method behind these is served."""
    return {
        "tools": {"listChanged": True},
        "prompts": {"listChanged": True},
        "resources": {"subscribe": True, "listChanged": True},
        "logging": {},
        "completions": {},
    }


def initialize_result(*, version: str, name: str, title: str, instructions: str) -> dict[str, Any]:
    return {
        "protocolVersion": version,
        "capabilities": capabilities(),
        "serverInfo": {"name": name, "title": title, "version": __version__},
        "instructions": instructions,
    }


def client_info(params: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The client's info and capabilities from `initialize` params; -32602 if malformed."""
    info = params.get("clientInfo", {})
    caps = params.get("capabilities", {})
    if not isinstance(info, dict) or not isinstance(caps, dict):
        raise InvalidParams(data={"field": "capabilities", "reason": "type"})
    if "protocolVersion" not in params:
        raise InvalidParams(data={"field": "protocolVersion", "reason": "required"})
    return {k: v for k, v in info.items() if k in ("name", "version", "title")}, caps
