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
    be written (no home directory, a read-only file system): `dev-token` then needs `--state`."""
    if records is None:
        return None
    path = record_path(records, port)
    body = json.dumps({"state_dir": str(state.absolute()), "pid": os.getpid()})
    try:
        records.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(body, encoding="utf-8")
        tmp.replace(path)
    except OSError:
        return None
    return path


def remove_record(path: Path | None) -> None:
    """Remove this process's record, unless another server on the port has replaced it since."""
    if path is None or _recorded(path)[1] != os.getpid():
        return
    with contextlib.suppress(OSError):
        path.unlink()


def find_key(*, explicit: Path | None, default: Path, records: Path | None, port: int) -> KeySearch:
    """The state directory holding the development key: `explicit` alone when given, else `default`
    (relative to the working directory), then the one the live development server on `port` recorded."""
    candidates = [explicit.absolute()] if explicit is not None else [default.absolute()]
    if explicit is None and records is not None:
        state, pid = _recorded(record_path(records, port))
        if state is not None and pid is not None and _is_running(pid):
            candidates.insert(0, state)
    looked = tuple(dict.fromkeys(candidates))
    found = next((state for state in looked if (state / KEY_FILE).is_file()), None)
    return KeySearch(looked, found)


def _recorded(path: Path) -> tuple[Path | None, int | None]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return Path(data["state_dir"]), int(data["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None, None


def _is_running(pid: int) -> bool:
    """Whether a process `pid` exists (a server killed without its cleanup leaves its record behind)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: alive
    return True
