"""The official TypeScript client (`@modelcontextprotocol/client`), run by Node from the project's
.tools/: scripts/node.sh installs both once, from the locks under requirements/npm/. A machine that
cannot install them fails the tests that use it: nothing skips."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.versions import TS_CLIENT_PACKAGE, TS_CLIENT_VERSION

ROOT = Path(__file__).resolve().parents[2]
NODE_SCRIPT = ROOT / "scripts" / "node.sh"


@dataclass(frozen=True)
class TypeScriptClient:
    node: str
    package: str


def install_node(*args: str) -> str:
    """scripts/node.sh with `args`: the path it prints last (Node, or the installed package)."""
    done = subprocess.run([str(NODE_SCRIPT), *args], capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        pytest.fail(f"scripts/node.sh {' '.join(args)} failed:\n{done.stderr}")
    return done.stdout.strip().splitlines()[-1]


def install_ts_client() -> TypeScriptClient:
    return TypeScriptClient(node=install_node(), package=install_node(TS_CLIENT_PACKAGE, TS_CLIENT_VERSION, "tsclient"))
