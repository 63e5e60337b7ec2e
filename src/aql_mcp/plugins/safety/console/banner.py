"""The console's line in the development banner (`aql-mcp serve --dev`): its address and the
development login's sign-in code (passcode.py; docs/console.md, "Signing in")."""

from __future__ import annotations

import shlex

from aql_mcp.plugin import Settings
from aql_mcp.plugins.safety.console.passcode import code_path, current_code


def console_banner(settings: Settings, *, terminal: bool) -> str:
    """The code, like the development token, only to a terminal; otherwise where to read it."""
    if not settings.console.enabled:
        return ""
    path = code_path(settings.store.path).absolute()
    code = current_code(settings.store.path) if terminal else None
    how = f"sign-in code: {code}" if code else f"sign-in code: run `cat {shlex.quote(str(path))}`"
    return f"\nOperator console: {settings.base_url}/console (development login; {how})\n"
