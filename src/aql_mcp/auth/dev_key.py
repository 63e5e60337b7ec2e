"""Where the development key is, wherever `aql-mcp dev-token` runs from.

The key lives in the state directory (`store.path`, `state` by default, relative to the directory
the service was started from). `aql-mcp serve --dev` leaves a record of that directory, as an
absolute path, in the user's state directory (`$XDG_STATE_HOME/aql-mcp`, else
`~/.local/state/aql-mcp`), one file per port, removed when it stops. `dev-token` looks for the key
in the state directory it was pointed at (`--state`, `store.path`), else in `./state` and in the
record of the development server on its port. It never makes a key: a key made where no server
reads it would mint tokens every server refuses.

The record holds a path and a process id, nothing secret; the key itself never leaves the state
directory.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from aql_mcp.auth.dev_issuer import KEY_FILE


@dataclass(frozen=True, slots=True)
class KeySearch:
    """Where the key was looked for, in order, and the state directory that holds it (None: none)."""

    looked: tuple[Path, ...]
    found: Path | None


def record_path(records: Path, port: int) -> Path:
    return records / f"dev-server-{port}.json"


def write_record(records: Path | None, port: int, state: Path) -> Path | None:
    """Record that the development server on `port` keeps its key under `state`; None if it cannot
    be written (no home directory, a read-only file system): `dev-token` then needs `--state`.

    The directory is the user's alone (0700) and the record is created under a random name that
    must not exist yet and is no symbolic link (O_EXCL, O_NOFOLLOW, 0600), then renamed over the
    old one: nobody else can plant a file or a link this process would write through.
    """
    if records is None:
        return None
    path = record_path(records, port)
    body = json.dumps({"state_dir": str(state.absolute()), "pid": os.getpid()}).encode("utf-8")
    tmp = records / f".{path.name}.{secrets.token_hex(8)}.tmp"
    try:
        records.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(records, 0o700)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as file:
            file.write(body)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
        return None
    return path


def remove_record(path: Path | None) -> None:
    """Remove this process's record, unless another server on the port has replaced it since."""
    if path is None or _recorded(path)[1] != os.getpid():
        return
    with contextlib.suppress(OSError):
        path.unlink()


def find_key(*, explicit: Path | None, default: Path, records: Path | None, port: int) -> KeySearch:
    """The state directory holding the development key: `explicit` alone when given, else the one
    the live development server on `port` recorded, then `default` (relative to the working
    directory): the running server's key is the one whose tokens it accepts."""
    candidates = [explicit.absolute()] if explicit is not None else [default.absolute()]
    if explicit is None and records is not None:
        state, pid = _recorded(record_path(records, port))
        if state is not None and pid is not None and _is_running(pid):
            candidates.insert(0, state)
    looked = tuple(dict.fromkeys(candidates))
    found = next((state for state in looked if (state / KEY_FILE).is_file()), None)
    return KeySearch(looked, found)


def _recorded(path: Path) -> tuple[Path | None, int | None]:
    """The record's state directory and process id; nothing from a record that is a link or that
    another user owns (it could point `dev-token` at a key of their choosing)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as file:
            if os.fstat(file.fileno()).st_uid != os.getuid():
                return None, None
            data = json.loads(file.read().decode("utf-8"))
        return Path(data["state_dir"]), int(data["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None, None


def _is_running(pid: int) -> bool:
    """Whether a process `pid` of this user exists (a server killed without its cleanup leaves its
    record behind; a pid reused by another user's process is not our server)."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True
