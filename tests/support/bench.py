"""bench/ is a directory of scripts, not a package: its modules are loaded by path for tests/bench/."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[2] / "bench"


def load_bench_module(name: str) -> ModuleType:
    """bench/<name>.py as the module `bench_<name>` (it must import nothing else from bench/)."""
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # A dataclass looks its module up in sys.modules while the module runs.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
