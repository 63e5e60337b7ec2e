"""Opaque bearer tokens (corporate Appendix A.3) from an allow-list of digests.

The allow-list holds SHA-256 digests, never tokens, so the settings and files that carry it hold
no secret. Tokens it does not know may be asked about by RFC 7662 introspection
(`auth/token_introspection.py`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from pathlib import Path

import yaml

from aql_mcp.auth.principal import Principal
from aql_mcp.exceptions import ConfigError

HEX_DIGEST = re.compile(r"[0-9a-f]{64}")


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).hexdigest()


class OpaqueTokens:
    """An allow-list: digest -> (subject, scopes)."""

    def __init__(self, entries: Mapping[str, tuple[str, tuple[str, ...]]]) -> None:
        self._entries = {d: Principal(subject=sub, scopes=frozenset(scopes)) for d, (sub, scopes) in entries.items()}

    def __len__(self) -> int:
        return len(self._entries)

    def lookup(self, token: str) -> Principal | None:
        return self._entries.get(digest(token))


def read_allow_list(path: Path) -> dict[str, tuple[str, tuple[str, ...]]]:
    """`{digest: {sub, scopes}}` from a YAML or JSON file (a mounted secret, say)."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(
            f"auth.opaque_tokens_file (AQL_MCP_AUTH__OPAQUE_TOKENS_FILE): cannot be read ({exc})"
        ) from None
    refusal = ConfigError(
        "auth.opaque_tokens_file (AQL_MCP_AUTH__OPAQUE_TOKENS_FILE): expected a mapping of SHA-256 hex "
        "digests (never tokens) to {sub: string, scopes: [strings]}"
    )
    if not isinstance(data, dict):
        raise refusal
    entries: dict[str, tuple[str, tuple[str, ...]]] = {}
    for key, value in data.items():
        scopes = value.get("scopes", []) if isinstance(value, dict) else None
        if not (
            isinstance(key, str)
            and HEX_DIGEST.fullmatch(key.lower())
            and isinstance(value, dict)
            and isinstance(value.get("sub"), str)
            and isinstance(scopes, list)
        ):
            raise refusal
        entries[key.lower()] = (value["sub"], tuple(str(s) for s in scopes))
    return entries
