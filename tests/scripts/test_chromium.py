"""scripts/chromium.sh: the browser for the console's browser test, from Debian's package (docs/console.md)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "chromium.sh"


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, **(env or {})}
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, check=False, env=environ, timeout=900)


def test_without_a_command_it_prints_its_usage_and_fails() -> None:
    result = run()
    assert result.returncode == 1
    assert "usage" in result.stderr


def test_path_prints_an_executable_browser(tmp_path: Path) -> None:
    browser = tmp_path / "chromium"
    browser.write_text("#!/bin/sh\n", encoding="utf-8")
    browser.chmod(0o755)
    result = run("path", env={"AQL_MCP_TEST_CHROMIUM": str(browser)})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(browser)
