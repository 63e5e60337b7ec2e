"""The chart's optional routes from the gateway (issue 23, "The chart meets the gateway";
docs/gateway.md): an Ingress with the annotations ingress-nginx needs for MCP and a Gateway API
HTTPRoute, both with timeouts above the tool timeout. Off by default; `helm lint --strict` with them
on; the Ingress checked by kubernetes-validate, the HTTPRoute (a CRD, for which no schema is
available offline) against the CRD's fields transcribed below; the values schema refuses bad values.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from tests.support.chart import CHART, find, helm, kubernetes_validate, only, render

GATEWAY = CHART / "ci" / "gateway-values.yaml"
TOOL_TIMEOUT = 30.0
MARGIN = 60

# The HTTPRoute fields this chart renders, as the Gateway API v1 CRD (gateway.networking.k8s.io,
# standard channel) declares them; anything else is refused here on purpose.
_DURATION = {"type": "string", "pattern": r"^([0-9]{1,5}(h|m|s|ms)){1,4}$"}
_HOSTNAME = {
    "type": "string",
    "maxLength": 253,
    "pattern": r"^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
}
_NAME = {"type": "string", "minLength": 1, "maxLength": 253}
HTTPROUTE_SCHEMA = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "gateway.networking.k8s.io/v1"},
        "kind": {"const": "HTTPRoute"},
        "metadata": {"type": "object", "required": ["name"]},
        "spec": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "parentRefs": {
                    "type": "array",
                    "maxItems": 32,
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["name"],
                        "properties": {
                            "group": {"type": "string"},
                            "kind": {"type": "string"},
                            "namespace": {"type": "string", "maxLength": 63},
                            "name": _NAME,
                            "sectionName": {"type": "string", "maxLength": 253},
                            "port": {"type": "integer", "minimum": 1, "maximum": 65535},
                        },
                    },
                },
                "hostnames": {"type": "array", "maxItems": 16, "items": _HOSTNAME},
                "rules": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": 16,
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "matches": {
                                "type": "array",
                                "maxItems": 64,
                                "items": {
                                    "type": "object",
                                    "additionalProperties": False,
                                    "properties": {
                                        "path": {
                                            "type": "object",
                                            "additionalProperties": False,
                                            "properties": {
                                                "type": {"enum": ["Exact", "PathPrefix", "RegularExpression"]},
                                                "value": {"type": "string", "maxLength": 1024, "pattern": "^/"},
                                            },
                                        }
                                    },
                                },
                            },
                            "backendRefs": {
                                "type": "array",
                                "maxItems": 16,
                                "items": {
                                    "type": "object",
                                    "additionalProperties": False,
                                    "required": ["name", "port"],
                                    "properties": {
                                        "name": _NAME,
                                        "port": {"type": "integer", "minimum": 1, "maximum": 65535},
                                    },
                                },
                            },
                            "timeouts": {
                                "type": "object",
                                "additionalProperties": False,
                                "properties": {"request": _DURATION, "backendRequest": _DURATION},
                            },
                        },
                    },
                },
            },
        },
    },
}


@pytest.fixture(scope="module")
def gateway_docs(deploy_tools: dict[str, Path]) -> list[dict[str, Any]]:
    return render(deploy_tools, "-f", GATEWAY)


def values_file(tmp_path: Path, values: dict[str, Any]) -> Path:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values), encoding="utf-8")
    return path


def seconds(duration: str) -> int:
    assert duration.endswith("s")
    assert duration[:-1].isdigit()
    return int(duration[:-1])


def test_neither_route_is_rendered_by_default(deploy_tools: dict[str, Path]) -> None:
    docs = render(deploy_tools)
    assert find(docs, "Ingress") == []
    assert find(docs, "HTTPRoute") == []


def test_helm_lint_strict_passes_with_both_routes(deploy_tools: dict[str, Path]) -> None:
    result = helm(deploy_tools, "lint", "--strict", "-f", GATEWAY)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_ingress_passes_kubernetes_validate_strict(
    deploy_tools: dict[str, Path], gateway_docs: list[dict[str, Any]], tmp_path: Path
) -> None:
    kubernetes_validate(deploy_tools, [only(gateway_docs, "Ingress")], tmp_path)


def test_the_ingress_routes_mcp_and_discovery_to_the_service_port_with_tls(gateway_docs: list[dict[str, Any]]) -> None:
    ingress = only(gateway_docs, "Ingress")
    service = only(gateway_docs, "Service")
    spec = ingress["spec"]
    assert spec["ingressClassName"] == "nginx"
    assert spec["tls"] == [{"secretName": "mcp-example-com-tls", "hosts": ["mcp.example.com"]}]
    (rule,) = spec["rules"]
    assert rule["host"] == "mcp.example.com"
    assert [(p["path"], p["pathType"]) for p in rule["http"]["paths"]] == [
        ("/mcp", "Prefix"),
        ("/.well-known", "Prefix"),
    ]
    port_names = {port["name"] for port in service["spec"]["ports"]}
    for path in rule["http"]["paths"]:
        assert path["backend"]["service"]["name"] == service["metadata"]["name"]
        assert path["backend"]["service"]["port"]["name"] in port_names


def test_the_ingress_annotations_keep_calls_and_streams_alive(gateway_docs: list[dict[str, Any]]) -> None:
    annotations = only(gateway_docs, "Ingress")["metadata"]["annotations"]
    prefix = "nginx.ingress.kubernetes.io/"
    assert annotations[prefix + "proxy-read-timeout"] == str(int(TOOL_TIMEOUT) + MARGIN)
    assert annotations[prefix + "proxy-send-timeout"] == str(int(TOOL_TIMEOUT) + MARGIN)
    assert annotations[prefix + "proxy-http-version"] == "1.1"
    # Above the service's 1 MiB, so the service answers an oversized body itself.
    body = annotations[prefix + "proxy-body-size"]
    assert body.endswith("k")
    assert int(body[:-1]) * 1024 > 1_048_576
    # The buffering of the stream is the service's to turn off (X-Accel-Buffering: no), and no
    # snippet annotation is needed (ingress-nginx >= 1.9 refuses them by default).
    assert not any("snippet" in key for key in annotations)


@pytest.mark.parametrize(("timeout", "margin"), [(30, 60), (300, 30), (12.5, 5)])
def test_the_timeouts_follow_the_tool_timeout(deploy_tools: dict[str, Path], timeout: float, margin: int) -> None:
    docs = render(
        deploy_tools,
        "-f",
        GATEWAY,
        "--set-json",
        f"config.limits.tool_timeout_seconds={timeout}",
        "--set",
        f"ingress.timeoutMarginSeconds={margin},httpRoute.timeoutMarginSeconds={margin}",
    )
    expected = math.ceil(timeout + margin)
    annotations = only(docs, "Ingress")["metadata"]["annotations"]
    assert int(annotations["nginx.ingress.kubernetes.io/proxy-read-timeout"]) == expected
    ((rule,),) = [only(docs, "HTTPRoute")["spec"]["rules"]]
    assert seconds(rule["timeouts"]["request"]) == expected
    assert seconds(rule["timeouts"]["backendRequest"]) == expected
    assert expected > timeout


def test_extra_ingress_annotations_are_added(deploy_tools: dict[str, Path]) -> None:
    docs = render(
        deploy_tools, "-f", GATEWAY, "--set-json", 'ingress.annotations={"cert-manager.io/cluster-issuer": "corp"}'
    )
    annotations = only(docs, "Ingress")["metadata"]["annotations"]
    assert annotations["cert-manager.io/cluster-issuer"] == "corp"
    assert "nginx.ingress.kubernetes.io/proxy-read-timeout" in annotations


def test_the_httproute_matches_the_crds_fields(gateway_docs: list[dict[str, Any]]) -> None:
    jsonschema.validate(only(gateway_docs, "HTTPRoute"), HTTPROUTE_SCHEMA)


def test_the_httproute_schema_check_refuses_what_the_crd_would() -> None:
    """The control for the test above: a duration the CRD's pattern refuses, and an unknown field."""
    route = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "r"},
        "spec": {"rules": [{"timeouts": {"request": "1.5m"}}]},
    }
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(route, HTTPROUTE_SCHEMA)
    route["spec"] = {"rules": [{"backendRefs": [{"name": "s", "port": 8000, "weight": "x"}]}]}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(route, HTTPROUTE_SCHEMA)


def test_the_httproute_attaches_to_the_parent_and_sends_to_the_service_port(
    gateway_docs: list[dict[str, Any]],
) -> None:
    route = only(gateway_docs, "HTTPRoute")
    service = only(gateway_docs, "Service")
    assert route["spec"]["parentRefs"] == [{"name": "corporate", "namespace": "gateway", "sectionName": "https"}]
    assert route["spec"]["hostnames"] == ["mcp.example.com"]
    (rule,) = route["spec"]["rules"]
    assert [m["path"] for m in rule["matches"]] == [
        {"type": "PathPrefix", "value": "/mcp"},
        {"type": "PathPrefix", "value": "/.well-known"},
    ]
    http_port = next(port["port"] for port in service["spec"]["ports"] if port["name"] == "http")
    assert rule["backendRefs"] == [{"name": service["metadata"]["name"], "port": http_port}]


BROKEN_VALUES = {
    "ingress without a host": {"ingress": {"enabled": True}},
    "ingress host with a scheme": {"ingress": {"hosts": ["https://mcp.example.com"]}},
    "ingress path without a slash": {"ingress": {"paths": ["mcp"]}},
    "ingress without paths": {"ingress": {"paths": []}},
    "ingress margin of zero": {"ingress": {"timeoutMarginSeconds": 0}},
    "ingress tls without a secret": {"ingress": {"tls": [{"hosts": ["mcp.example.com"]}]}},
    "ingress unknown key": {"ingress": {"host": "mcp.example.com"}},
    "httproute without a parent": {"httpRoute": {"enabled": True}},
    "httproute parent without a name": {"httpRoute": {"enabled": True, "parentRefs": [{"namespace": "gateway"}]}},
    "httproute margin as text": {"httpRoute": {"timeoutMarginSeconds": "60s"}},
    "httproute unknown key": {"httpRoute": {"timeouts": {"request": "90s"}}},
}


@pytest.mark.parametrize("values", BROKEN_VALUES.values(), ids=BROKEN_VALUES.keys())
def test_bad_route_values_are_refused_by_the_schema(
    deploy_tools: dict[str, Path], values: dict[str, Any], tmp_path: Path
) -> None:
    result = helm(deploy_tools, "template", "aql", "-f", values_file(tmp_path, values))
    assert result.returncode != 0, f"helm template accepted {values}"
    assert "schema" in result.stdout + result.stderr
