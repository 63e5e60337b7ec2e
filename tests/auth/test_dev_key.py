"""Where `dev-token` looks for the development key (auth/dev_key.py)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from aql_mcp.auth.dev_issuer import KEY_FILE, DevIssuer
from aql_mcp.auth.dev_key import find_key, record_path, remove_record, write_record

PORT = 8765


def make_key(state: Path) -> Path:
    DevIssuer(state_dir=state, issuer="http://127.0.0.1", audience="http://127.0.0.1/mcp")
    return state


def dead_pid() -> int:
    """The id of a process that has exited (and been reaped)."""
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, check=True)
    return int(done.stdout)


def test_the_running_servers_record_is_looked_at_first(tmp_path: Path) -> None:
    state = make_key(tmp_path / "project" / "state")
    records = tmp_path / "records"
    write_record(records, PORT, state)

    search = find_key(explicit=None, default=tmp_path / "nowhere", records=records, port=PORT)

    assert search.found == state
    assert search.looked == (state, (tmp_path / "nowhere").absolute())


def test_a_record_left_by_a_dead_server_is_ignored(tmp_path: Path) -> None:
    state = make_key(tmp_path / "state")
    records = tmp_path / "records"
    records.mkdir()
    record_path(records, PORT).write_text(json.dumps({"state_dir": str(state), "pid": dead_pid()}))

    search = find_key(explicit=None, default=tmp_path / "nowhere", records=records, port=PORT)

    assert search.found is None
    assert search.looked == ((tmp_path / "nowhere").absolute(),)


def test_an_explicit_state_directory_is_the_only_place_looked_at(tmp_path: Path) -> None:
    records = tmp_path / "records"
    write_record(records, PORT, make_key(tmp_path / "recorded"))
    explicit = tmp_path / "explicit"

    search = find_key(explicit=explicit, default=tmp_path, records=records, port=PORT)

    assert (search.found, search.looked) == (None, (explicit,))
    assert not (explicit / KEY_FILE).exists()


def test_a_record_replaced_by_another_server_is_not_removed(tmp_path: Path) -> None:
    records = tmp_path / "records"
    mine = write_record(records, PORT, tmp_path / "a")
    assert mine is not None
    mine.write_text(json.dumps({"state_dir": str(tmp_path / "b"), "pid": os.getpid() + 1}))

    remove_record(mine)

    assert mine.exists()


def test_a_record_that_cannot_be_written_is_skipped(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")

    assert write_record(blocked / "records", PORT, tmp_path) is None
    assert write_record(None, PORT, tmp_path) is None
    remove_record(None)


def test_a_corrupt_record_is_ignored(tmp_path: Path) -> None:
    records = tmp_path / "records"
    records.mkdir()
    record_path(records, PORT).write_text("{not json")

    assert find_key(explicit=None, default=tmp_path / "s", records=records, port=PORT).found is None


def test_the_records_directory_and_the_record_are_the_users_alone(tmp_path: Path) -> None:
    records = tmp_path / "records"
    records.mkdir(mode=0o755)
    records.chmod(0o755)

    path = write_record(records, PORT, tmp_path / "state")

    assert path is not None
    assert stat.S_IMODE(records.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in records.iterdir()] == [path.name]  # no temporary file left


def test_a_link_planted_where_the_old_temporary_file_went_is_not_written_through(tmp_path: Path) -> None:
    records, victim = tmp_path / "records", tmp_path / "victim"
    records.mkdir(mode=0o700)
    victim.write_text("untouched")
    (records / f"dev-server-{PORT}.{os.getpid()}.tmp").symlink_to(victim)
    record_path(records, PORT).symlink_to(victim)

    assert write_record(records, PORT, tmp_path / "state") is not None

    assert victim.read_text() == "untouched"
    assert not record_path(records, PORT).is_symlink()


def test_a_record_that_is_a_link_is_ignored(tmp_path: Path) -> None:
    state = make_key(tmp_path / "state")
    records, elsewhere = tmp_path / "records", tmp_path / "elsewhere.json"
    records.mkdir()
    elsewhere.write_text(json.dumps({"state_dir": str(state), "pid": os.getpid()}))
    record_path(records, PORT).symlink_to(elsewhere)

    assert find_key(explicit=None, default=tmp_path / "nowhere", records=records, port=PORT).found is None


@pytest.mark.skipif(os.getuid() != 0, reason="giving a file to another user needs root")
def test_a_record_another_user_owns_is_ignored(tmp_path: Path) -> None:
    state = make_key(tmp_path / "state")
    records = tmp_path / "records"
    path = write_record(records, PORT, state)
    assert path is not None
    os.chown(path, 65534, 65534)

    assert find_key(explicit=None, default=tmp_path / "nowhere", records=records, port=PORT).found is None


def test_a_recorded_process_of_another_user_is_not_our_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    state = make_key(tmp_path / "state")
    records = tmp_path / "records"
    write_record(records, PORT, state)

    def not_permitted(pid: int, sig: int) -> None:
        raise PermissionError(1, "Operation not permitted")  # what kill(2) says of another user's process

    monkeypatch.setattr(os, "kill", not_permitted)

    assert find_key(explicit=None, default=tmp_path / "nowhere", records=records, port=PORT).found is None
