"""Just enough of a Kubernetes API server on 127.0.0.1 for `helm template --dry-run=server`.

The chart's `lookup` (templates/request-state-secret.yaml) only runs against a cluster, and there is
no cluster here. Helm asks for: /version, discovery (/api, /apis, /api/v1, /apis/<group>/v1) to map
each rendered kind to a resource, a GET of each object it would create (to refuse taking over one
another release owns), and the lookups. This answers those from a dict of Secrets and 404s every
other object, so the rendering is Helm's own, as against a namespace holding only those Secrets.
Read-only: anything but GET is 405.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

# The kinds the chart renders, by discovery path (the optional ones included).
RESOURCES = {
    "/api/v1": [
        ("secrets", "Secret"),
        ("configmaps", "ConfigMap"),
        ("services", "Service"),
        ("serviceaccounts", "ServiceAccount"),
        ("persistentvolumeclaims", "PersistentVolumeClaim"),
        ("pods", "Pod"),
    ],
    "/apis/apps/v1": [("deployments", "Deployment")],
    "/apis/policy/v1": [("poddisruptionbudgets", "PodDisruptionBudget")],
    "/apis/autoscaling/v2": [("horizontalpodautoscalers", "HorizontalPodAutoscaler")],
    "/apis/networking.k8s.io/v1": [("networkpolicies", "NetworkPolicy")],
}


@dataclass
class KubeApi:
    """The namespace's Secrets by name (as the API returns them) and the paths Helm asked for."""

    secrets: dict[str, dict[str, Any]] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)
    url: str = ""

    def kubeconfig(self, directory: Path, namespace: str) -> Path:
        path = directory / "kubeconfig"
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "stub", "cluster": {"server": self.url}}],
            "users": [{"name": "stub", "user": {}}],
            "contexts": [{"name": "stub", "context": {"cluster": "stub", "user": "stub", "namespace": namespace}}],
            "current-context": "stub",
        }
        path.write_text(json.dumps(config), encoding="utf-8")
        return path

    def answer(self, path: str) -> tuple[int, dict[str, Any]]:
        self.requests.append(path)
        path = path.split("?", 1)[0]
        if path == "/version":
            return 200, {"major": "1", "minor": "37", "gitVersion": "v1.37.0", "platform": "linux/amd64"}
        if path == "/api":
            return 200, {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}
        if path == "/apis":
            return 200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": _groups()}
        if path in RESOURCES:
            return 200, _resource_list(path)
        parts = path.strip("/").split("/")
        if parts[:3] == ["api", "v1", "namespaces"] and len(parts) == 6 and parts[4] == "secrets":
            secret = self.secrets.get(parts[5])
            if secret is not None:
                return 200, secret
        return 404, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404}


def _groups() -> list[dict[str, Any]]:
    groups = []
    for path in RESOURCES:
        if path.startswith("/apis/"):
            group, version = path.removeprefix("/apis/").split("/")
            entry = {"groupVersion": f"{group}/{version}", "version": version}
            groups.append({"name": group, "versions": [entry], "preferredVersion": entry})
    return groups


def _resource_list(path: str) -> dict[str, Any]:
    resources = [
        {"name": name, "singularName": kind.lower(), "namespaced": True, "kind": kind, "verbs": ["get", "list"]}
        for name, kind in RESOURCES[path]
    ]
    group_version = path.removeprefix("/apis/").removeprefix("/api/")
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}


@contextmanager
def kube_api(secrets: dict[str, dict[str, Any]]) -> Iterator[KubeApi]:
    api = KubeApi(secrets=secrets)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            status, body = api.answer(self.path)
            self._send(status, body)

        def do_POST(self) -> None:
            self._send(405, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 405})

        do_PUT = do_PATCH = do_DELETE = do_POST

        def _send(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # silence: helm asks many times
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    api.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield api
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
