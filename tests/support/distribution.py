"""An installed distribution as importlib.metadata finds it: a `*.dist-info` directory on sys.path.

Tests that need a package offering plugins through entry points (`aql_mcp.plugins`) put one in a
temporary directory and prepend that directory to sys.path, instead of installing anything into
the environment the suite runs in.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

GROUP = "aql_mcp.plugins"


def fake_distribution(root: Path, name: str, offers: Mapping[str, str], version: str = "1.0") -> Path:
    """`name` `version` under `root`, offering `offers` (entry point name to `module:attribute`)."""
    info = root / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n", encoding="utf-8")
    lines = [f"[{GROUP}]", *(f"{point} = {value}" for point, value in offers.items())]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root
