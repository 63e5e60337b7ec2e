"""The `console` settings section (config/default.yaml documents each key)."""

from __future__ import annotations

from pydantic import Field

from aql_mcp.section import Section


class ConsoleSettings(Section):
    """The operator console at `/console` (docs/console.md)."""

    enabled: bool = True
    # How often an open console page's event stream re-reads the store (seconds).
    refresh_seconds: float = Field(default=2.0, ge=0.2, le=60)
    # Lifetime of the development login cookie and the token it carries (development mode only).
    cookie_seconds: int = Field(default=28_800, ge=60, le=86_400)
