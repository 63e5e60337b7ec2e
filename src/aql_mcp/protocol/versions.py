"""Every protocol version the server knows, the era each belongs to, and the era of a request.

All version logic lives here (docs/eras.md). Two eras share `/mcp`:

- legacy (2025-03-26 to 2025-11-25): an `initialize` handshake opens a session, GET streams,
  DELETE, `Last-Event-ID`;
- modern (2026-07-28): no handshake; every request carries its version, client info and
  capabilities in `_meta` and is served on its own (MCP 2026-07-28, Versioning).

The era of an HTTP request is decided from its `MCP-Protocol-Version` header, which a modern
request MUST send and which MUST equal `_meta["io.modelcontextprotocol/protocolVersion"]`
(2026-07-28 Streamable HTTP, "Protocol Version Header"); the modern edge checks that equality.
When the header names no version or a legacy one, a `_meta` naming another version makes the
request modern, so that the modern edge refuses the header (`request_era`).
"""

from __future__ import annotations

from enum import Enum

LATEST = "2025-11-25"
LEGACY_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26")
MODERN_VERSIONS = ("2026-07-28",)
# Without a header and no session to tell, assume the oldest Streamable HTTP version (2025-11-25 transports).
DEFAULT_HEADER_VERSION = "2025-03-26"
# 2025-11-25 clients understand the priming event (an id with empty data); older ones may not.
PRIMING_SINCE = "2025-11-25"
# `elicitation/create` names its `mode` ("form" or "url") from 2025-11-25 on; older clients reject it.
ELICITATION_MODE_SINCE = "2025-11-25"

# The per-request `_meta` keys of the modern era (2026-07-28 basic, "Per-request protocol fields").
META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
META_CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_LOG_LEVEL = "io.modelcontextprotocol/logLevel"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"


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


def has_elicitation_mode(version: str) -> bool:
    """Whether a client of `version` expects `mode` in `elicitation/create` (MCP 2025-11-25)."""
    return version >= ELICITATION_MODE_SINCE


def is_supported(version: str) -> bool:
    """Whether `initialize` may negotiate `version` (only legacy versions have a handshake)."""
    return era_of(version) is Era.LEGACY


def request_era(header_version: str | None, *, modern_enabled: bool, meta_version: str | None = None) -> Era:
    """Which edge answers an HTTP request to `/mcp`, from its `MCP-Protocol-Version` header and,
    when that names no version or a legacy one, the version the body's `_meta` names.

    No header or a legacy version: the legacy edge, as before the modern era existed, unless
    `mcp.modern_era` is on and `_meta` names a version that is not legacy: a request carrying modern
    per-request `_meta` is a modern one (2026-07-28 Versioning, "Backward Compatibility"), and the
    modern edge refuses its header with -32020. With the setting on, every other header version goes
    to the modern edge, which answers an unknown one with `UnsupportedProtocolVersionError` after
    the checks the spec puts first. Off, a modern or unknown header version is UNKNOWN: refused with
    today's 400 -32600, which a dual-era client reads as "legacy server, fall back to initialize".
    """
    era = era_of(header_version)
    if era is Era.LEGACY:
        if modern_enabled and meta_version is not None and era_of(meta_version) is not Era.LEGACY:
            return Era.MODERN
        return Era.LEGACY
    return Era.MODERN if modern_enabled else Era.UNKNOWN


def supported_versions(*, modern_enabled: bool) -> list[str]:
    """The versions an error names as supported: newest first, modern ones only when served."""
    return [*MODERN_VERSIONS, *LEGACY_VERSIONS] if modern_enabled else list(LEGACY_VERSIONS)
