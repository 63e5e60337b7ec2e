"""The Helm chart as the tests render it: helm, kubernetes-validate, the rendered documents."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "aql-mcp"
PRODUCTION = CHART / "ci" / "production-values.yaml"
KUBERNETES_VERSION = "1.37.0"
NAMESPACE = "mcp"


class StrictLoader(yaml.SafeLoader):
    """YAML that refuses duplicate keys (the API server would silently keep the last one)."""


def _construct_mapping(loader: StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    keys = [loader.construct_object(key) for key, _ in node.value]
    duplicates = {key for key in keys if keys.count(key) > 1}
    assert not duplicates, f"duplicate keys {duplicates} at {node.start_mark}"
    return loader.construct_mapping(node)


StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def helm(tools: dict[str, Path], *args: str | Path, chart: Path = CHART) -> subprocess.CompletedProcess[str]:
    command = [str(tools["helm"]), *(str(a) for a in args), str(chart)]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


def render(tools: dict[str, Path], *args: str | Path, chart: Path = CHART) -> list[dict[str, Any]]:
    result = helm(tools, "template", "aql", "--namespace", NAMESPACE, *args, chart=chart)
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.load_all(result.stdout, Loader=StrictLoader) if doc]


def find(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [doc for doc in docs if doc["kind"] == kind]


def only(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (doc,) = find(docs, kind)
    return doc


def kubernetes_validate(tools: dict[str, Path], docs: list[dict[str, Any]], tmp_path: Path) -> None:
    """Every built-in resource against the Kubernetes schemas, unknown fields refused (--strict)."""
    builtin = [doc for doc in docs if "monitoring.coreos.com" not in doc["apiVersion"]]
    manifest = tmp_path / "manifests.yaml"
    manifest.write_text(yaml.safe_dump_all(builtin), encoding="utf-8")
    command = [str(tools["kubernetes-validate"]), "--strict", "--no-warn", "-k", KUBERNETES_VERSION, str(manifest)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count(" passed ") == len(builtin), result.stdout
