"""The development login's sign-in code (docs/console.md, "Signing in").

Without it, anyone who can reach the development console could sign in as an operator. A fresh code
(`secrets.token_urlsafe(18)`, 144 bits) is made each time the service starts, written to
`console-login-code` in the state directory with mode 0600 (only the user running the service can
read it) and shown on the service's terminal by `make run`'s banner when stderr is a terminal. The
login form asks for it and compares it in constant time. It is never logged.
"""

from __future__ import annotations

import hmac
import os
import secrets
from pathlib import Path

CODE_FILE = "console-login-code"
CODE_BYTES = 18


def code_path(state_dir: Path) -> Path:
    return state_dir / CODE_FILE


def new_code(state_dir: Path) -> str:
    """A fresh code replaces the previous one: written to a new file with 0600 from the start, then
    renamed. A temporary file left behind (or a link planted in its place) is removed first, so the
    code never goes into a file someone else created."""
    code = secrets.token_urlsafe(CODE_BYTES)
    path = code_path(state_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as handle:
        handle.write(code + "\n")
    os.replace(tmp, path)
    return code


def current_code(state_dir: Path) -> str | None:
    try:
        return code_path(state_dir).read_text(encoding="ascii").strip() or None
    except (OSError, UnicodeDecodeError):
        return None


def code_matches(state_dir: Path, offered: str) -> bool:
    expected = current_code(state_dir)
    if expected is None:
        return False
    return hmac.compare_digest(offered.encode("utf-8"), expected.encode("utf-8"))
