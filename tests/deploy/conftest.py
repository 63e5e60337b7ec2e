"""The deployment checkers (helm, hadolint, kubernetes-validate), installed once per session."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def deploy_tools() -> dict[str, Path]:
    """`scripts/deploy-tools.sh`: installs into .tools/deploy/ when missing, prints NAME=PATH lines."""
    result = subprocess.run(
        ["bash", str(ROOT / "scripts" / "deploy-tools.sh")], capture_output=True, text=True, timeout=600, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]
    tools = dict(line.split("=", 1) for line in result.stdout.splitlines() if "=" in line)
    return {name: Path(path) for name, path in tools.items()}
