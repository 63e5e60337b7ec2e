"""Secrets used by this test run and the server logs it produced, checked against each other at the end.

`tests/conftest.py` fails the run if any secret (a token minted for a server, an Authorization or
Cookie value) appears in any line of any server's log: redaction is checked over the whole run,
not only in the tests written for it (observability issue; corporate §15.2).
"""

from __future__ import annotations

from pathlib import Path

# Markers of what must never reach a caller (corporate §13.3): a stack trace, a source path, an engine.
# The fuzz run checks every answer for them; the README, served as `doc://readme`, must not carry them.
WIRE_LEAKS = (
    "Traceback (most recent call last)",
    'File "/',
    "/site-packages/",
    "/src/aql_mcp",
    "sqlite3.",
    "asyncpg.",
    "OperationalError",
    "IntegrityError",
)
SECRETS: set[str] = set()
LOGS: set[Path] = set()


def remember_secret(secret: str) -> str:
    SECRETS.add(secret)
    return secret


def leaks() -> list[str]:
    """`file: secret prefix` for every secret found in a server log."""
    found = []
    for path in sorted(LOGS):
        if not path.exists():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        found.extend(f"{path}: {secret[:12]}..." for secret in SECRETS if len(secret) >= 16 and secret in text)
    return found
