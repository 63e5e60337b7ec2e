"""plugins/safety/console/passcode.py: the development login's sign-in code (docs/console.md, "Signing in")."""

from __future__ import annotations

import stat
from pathlib import Path

from aql_mcp.plugins.safety.console.passcode import code_matches, code_path, current_code, new_code


def test_each_start_writes_a_new_code_only_its_owner_can_read(tmp_path: Path) -> None:
    first, second = new_code(tmp_path), new_code(tmp_path)
    assert first != second
    assert current_code(tmp_path) == second
    assert stat.S_IMODE(code_path(tmp_path).stat().st_mode) == 0o600


def test_a_planted_temporary_file_or_link_is_replaced_not_written_through(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("untouched\n")
    code_path(tmp_path).with_suffix(".tmp").symlink_to(elsewhere)

    code = new_code(tmp_path)

    assert elsewhere.read_text() == "untouched\n"
    assert current_code(tmp_path) == code
    assert not code_path(tmp_path).is_symlink()


def test_only_the_current_code_matches(tmp_path: Path) -> None:
    assert not code_matches(tmp_path, "anything")  # no code written yet
    old = new_code(tmp_path)
    code = new_code(tmp_path)
    assert code_matches(tmp_path, code)
    assert not code_matches(tmp_path, old)
    assert not code_matches(tmp_path, code + "x")
