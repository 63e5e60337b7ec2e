"""scripts/import_graph.py: cycles, up imports, top-level modules and function lengths of a package.

Each test writes a throwaway package under tmp_path (with its own `layers` contract) and runs the
checker on it in a subprocess, as `make lint` does, so the verdict is the exit code a build sees.
The last test measures aql_mcp itself.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "import_graph.py"

PYPROJECT = """
[tool.importlinter]
root_package = "{package}"

[[tool.importlinter.contracts]]
id = "layers"
name = "layers"
type = "layers"
containers = ["{package}"]
layers = ["top", "middle | side", "bottom"]
"""


def write_package(tmp_path: Path, package: str, modules: dict[str, str]) -> Path:
    """A package named `package` with `modules` (name -> source) and its pyproject.toml; returns the latter."""
    folder = tmp_path / "src" / package
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text("")
    for name, source in modules.items():
        (folder / f"{name}.py").write_text(textwrap.dedent(source))
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(PYPROJECT.format(package=package))
    return pyproject


def run(tmp_path: Path, package: str, *limits: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, str(SCRIPT), "--package", package, "--path", str(tmp_path / "src")]
    command += ["--pyproject", str(tmp_path / "pyproject.toml"), *limits]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


def test_a_cycle_between_modules_is_reported_and_fails(tmp_path: Path) -> None:
    write_package(
        tmp_path,
        "cyclic_pkg",
        {
            "top": "from cyclic_pkg import middle\n",
            "middle": "from cyclic_pkg import bottom\n",
            # Imported lazily and only for typing: still a cycle a reader has to follow.
            "bottom": """
                from typing import TYPE_CHECKING
                if TYPE_CHECKING:
                    from cyclic_pkg import side
                def f():
                    from cyclic_pkg import middle
            """,
            "side": "",
        },
    )
    result = run(tmp_path, "cyclic_pkg", "--max-cycles", "0")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "cycles: 1 (at most 0: OVER)" in result.stdout
    assert "cyclic_pkg.bottom <-> cyclic_pkg.middle" in result.stdout
    assert "over the threshold: cycles" in result.stderr


def test_a_package_without_cycles_passes(tmp_path: Path) -> None:
    write_package(
        tmp_path,
        "acyclic_pkg",
        {"top": "from acyclic_pkg import middle, side\n", "middle": "from acyclic_pkg import bottom\n", "side": ""},
    )
    (tmp_path / "src" / "acyclic_pkg" / "bottom.py").write_text("")
    result = run(tmp_path, "acyclic_pkg", "--max-cycles", "0", "--max-up-imports", "0")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "cycles: 0 (at most 0)" in result.stdout
    assert "up imports: 0 (at most 0)" in result.stdout


def test_imports_up_the_layers_are_listed_with_their_line_and_counted(tmp_path: Path) -> None:
    write_package(
        tmp_path,
        "upward_pkg",
        {
            "top": "",
            "middle": "import os\nfrom upward_pkg import top\n",
            "bottom": "from upward_pkg import side\n",
            "side": "",
        },
    )
    result = run(tmp_path, "upward_pkg", "--max-up-imports", "1")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "up imports: 2 (at most 1: OVER)" in result.stdout
    assert "upward_pkg.middle -> upward_pkg.top (l.2)" in result.stdout
    assert "upward_pkg.bottom -> upward_pkg.side (l.1)" in result.stdout


@pytest.mark.parametrize(("flag", "code"), [("--max-function-lines", 1), ("--warn-function-lines", 0)])
def test_long_functions_fail_or_are_only_reported(tmp_path: Path, flag: str, code: int) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(61))
    write_package(tmp_path, "long_pkg", {"top": f"def long():\n{body}\n\n\ndef short():\n    pass\n"})
    result = run(tmp_path, "long_pkg", flag, "60")
    assert result.returncode == code, result.stdout + result.stderr
    assert "longest function: 62" in result.stdout
    assert "long_pkg.top.long: 62 lines" in result.stdout
    assert "short" not in result.stdout


def test_too_many_top_level_modules_fail(tmp_path: Path) -> None:
    write_package(tmp_path, "flat_pkg", {"top": "", "middle": "", "bottom": ""})
    assert run(tmp_path, "flat_pkg", "--max-top-level", "3").returncode == 0
    result = run(tmp_path, "flat_pkg", "--max-top-level", "2")
    assert result.returncode == 1
    assert "top-level modules: 3 (at most 2: OVER)" in result.stdout


def test_aql_mcp_has_no_cycle_outside_the_executions_plugin_and_few_top_level_modules() -> None:
    """The project's own graph, as `make lint` measures it (docs/architecture.md, "Checking the layers")."""
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--max-top-level", "20"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr
    cycles = [line for line in result.stdout.splitlines() if "<->" in line]
    assert all(line.strip().startswith("aql_mcp.plugins.executions.") for line in cycles), cycles
