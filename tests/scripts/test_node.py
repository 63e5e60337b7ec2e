"""scripts/node.sh: a locked npm tree is installed again when its package-lock.json changes.

npm is replaced by a recording stand-in on PATH (an outside tool, and the registry is out of reach
in tests): what is checked is when node.sh asks for an install, not npm itself.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NODE_SH = ROOT / "scripts" / "node.sh"
PACKAGE, VERSION, DIR = "@modelcontextprotocol/client", "2.4.0", "tsclient"
# `npm ci --prefix P`: records the call and lays out the package as npm would.
FAKE_NPM = f"""#!/bin/sh
echo "$@" >> "$NPM_CALLS"
while [ $# -gt 0 ]; do [ "$1" = --prefix ] && prefix="$2"; shift; done
mkdir -p "$prefix/node_modules/{PACKAGE}"
echo '{{"version": "{VERSION}"}}' > "$prefix/node_modules/{PACKAGE}/package.json"
"""


def run_node_sh(tmp_path: Path) -> list[str]:
    """node.sh NAME VERSION DIR with .tools in tmp_path; the npm calls made so far."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "npm").write_text(FAKE_NPM, encoding="utf-8")
    (bin_dir / "npm").chmod(0o755)
    calls = tmp_path / "calls"
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "NODE_TOOLS": str(tmp_path / "tools"),
        "NPM_CALLS": str(calls),
    }
    done = subprocess.run(
        [str(NODE_SH), PACKAGE, VERSION, DIR], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(tmp_path / "tools" / DIR / "node_modules" / PACKAGE)
    return calls.read_text(encoding="utf-8").splitlines() if calls.exists() else []


def test_a_locked_tree_is_installed_once_and_again_when_its_lock_changes(tmp_path: Path) -> None:
    assert len(run_node_sh(tmp_path)) == 1
    assert len(run_node_sh(tmp_path)) == 1  # the same lock: nothing to do
    marker = tmp_path / "tools" / DIR / ".installed-lock"
    marker.write_text("the hash of an older package-lock.json\n", encoding="utf-8")

    calls = run_node_sh(tmp_path)

    assert len(calls) == 2
    assert calls[-1].startswith("ci ")
    assert "--silent" not in calls[-1]  # npm's errors reach stderr
