"""The Helm chart (helm/aql-mcp), rendered by a real helm and checked by real validators.

`helm lint --strict`, `helm template`, `kubernetes-validate --strict` against the Kubernetes
schemas, the chart's values.schema.json, and `aql-mcp check-config` on the config file the
ConfigMap renders. The tools come from scripts/deploy-tools.sh (PyPI only).
"""

from __future__ import annotations

import base64
import ipaddress
import json
import math
import os
import re
import subprocess
import sys
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from aql_mcp.settings import field_defaults
from tests.support.chart import (
    CHART,
    NAMESPACE,
    PRODUCTION,
    ROOT,
    StrictLoader,
    find,
    helm,
    kubernetes_validate,
    only,
    render,
)
from tests.support.kube_api import KubeApi, kube_api

POSTGRES = CHART / "ci" / "postgres-values.yaml"
METRICS_PORT = 9100
PROBES_PORT = 8081
STATE_PATH = "/var/lib/aql-mcp"
CONFIG_FILE = "/etc/aql-mcp/config.yaml"
# Settings the chart sets itself instead of taking them from values (see values.yaml, `config:`).
CHART_OWNED = {
    ("server", "host"),  # 0.0.0.0, also the image's entrypoint
    ("server", "port"),  # containerPort
    ("server", "dev"),  # never: development mode is for a workstation
    ("store", "path"),  # the state volume's mount path
    ("auth", "hs256_secret"),  # development mode only; refused by the service otherwise
    ("auth", "introspection_client_secret"),  # secrets.introspectionClientSecret -> env from a Secret
    ("auth", "opaque_tokens_file"),  # secrets.opaqueTokens -> a mounted Secret
    ("auth", "dev_token_ttl_seconds"),  # development mode only
    ("console", "cookie_seconds"),  # the development login's cookie: development mode only
    ("store", "url"),  # store.postgres.secretName/urlKey -> env from a Secret
    ("store", "listen_url"),  # store.postgres.listenUrlKey -> env from a Secret
    ("store", "password"),  # store.postgres.passwordKey -> env from a Secret
    ("store", "password_file"),  # the password comes by environment from the Secret instead
    ("store", "ssl_root_cert"),  # store.postgres.caSecretName -> a mounted Secret
    ("mcp", "request_state_key"),  # secrets.requestStateKey (or the generated Secret) -> env from a Secret
    ("mcp", "request_state_previous_key"),  # secrets.requestStatePreviousKey -> env from a Secret
}


def server_container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (container,) = only(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    return container


# One `config.auth.issuers` entry as values give it (docs/identity.md).
ISSUER_ENTRY: dict[str, Any] = {
    "issuer": "https://idp.example.com/realms/agents",
    "jwks_url": "https://idp.example.com/realms/agents/certs",
    "audiences": ["aql-mcp"],
    "claims": {"tenant": "organization", "scopes": ["realm_access.roles"]},
}


def rendered_config(docs: list[dict[str, Any]]) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(only(docs, "ConfigMap")["data"]["config.yaml"])
    return loaded


@pytest.fixture(scope="module")
def default_docs(deploy_tools: dict[str, Path]) -> list[dict[str, Any]]:
    return render(deploy_tools)


@pytest.fixture(scope="module")
def production_docs(deploy_tools: dict[str, Path]) -> list[dict[str, Any]]:
    return render(deploy_tools, "-f", PRODUCTION)


@pytest.fixture(scope="module")
def metrics_port_docs(deploy_tools: dict[str, Path]) -> list[dict[str, Any]]:
    """Production, with /metrics on a port of its own."""
    return render(deploy_tools, "-f", PRODUCTION, "--set", f"config.metrics.port={METRICS_PORT}")


@pytest.fixture(scope="module")
def postgres_docs(deploy_tools: dict[str, Path]) -> list[dict[str, Any]]:
    """Production, with several replicas on a managed PostgreSQL."""
    return render(deploy_tools, "-f", PRODUCTION, "-f", POSTGRES)


@pytest.fixture(params=["default", "production", "metrics_port"])
def docs(request: pytest.FixtureRequest) -> list[dict[str, Any]]:
    rendered: list[dict[str, Any]] = request.getfixturevalue(f"{request.param}_docs")
    return rendered


def values_file(tmp_path: Path, values: dict[str, Any]) -> Path:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values), encoding="utf-8")
    return path


# --- lint and validation ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "values", [[], ["-f", PRODUCTION], ["-f", PRODUCTION, "-f", POSTGRES]], ids=["default", "production", "postgres"]
)
def test_helm_lint_strict_passes(deploy_tools: dict[str, Path], values: list[str | Path]) -> None:
    result = helm(deploy_tools, "lint", "--strict", *values)
    assert result.returncode == 0, result.stdout + result.stderr


def test_rendered_manifests_pass_kubernetes_validate_strict(
    deploy_tools: dict[str, Path], docs: list[dict[str, Any]], tmp_path: Path
) -> None:
    kubernetes_validate(deploy_tools, docs, tmp_path)


def test_kubernetes_validate_strict_rejects_an_unknown_field(
    deploy_tools: dict[str, Path], default_docs: list[dict[str, Any]], tmp_path: Path
) -> None:
    """The control for the test above: the validator does refuse what Kubernetes would."""
    broken = yaml.safe_load(yaml.safe_dump(only(default_docs, "Deployment")))
    broken["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]["httpGet"]["paht"] = "/health"
    with pytest.raises(AssertionError):
        kubernetes_validate(deploy_tools, [broken], tmp_path)


def test_production_render_has_every_optional_resource(production_docs: list[dict[str, Any]]) -> None:
    kinds = {doc["kind"] for doc in production_docs}
    assert kinds >= {
        "Deployment",
        "Service",
        "ConfigMap",
        "ServiceAccount",
        "PersistentVolumeClaim",
        "PodDisruptionBudget",
        "ServiceMonitor",
        "NetworkPolicy",
    }
    assert "Secret" not in kinds
    assert "HorizontalPodAutoscaler" not in kinds


# --- the pod ------------------------------------------------------------------------------------


def test_probes_ask_health_and_ready_on_the_probes_port_which_no_service_port_exposes(
    docs: list[dict[str, Any]],
) -> None:
    """Issue 27, N3: a connection flood on the service port cannot fail a liveness probe."""
    container = server_container(docs)
    port = container["ports"][0]
    service_ports = only(docs, "Service")["spec"]["ports"]
    assert service_ports[0]["targetPort"] == port["name"] == "http"
    assert port["containerPort"] == rendered_config(docs)["server"]["port"]
    container_ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert container_ports["probes"] == rendered_config(docs)["probes"]["port"] == PROBES_PORT
    assert "probes" not in {p["targetPort"] for p in service_ports}
    assert container["livenessProbe"]["httpGet"] == {"path": "/health", "port": "probes"}
    assert container["startupProbe"]["httpGet"] == {"path": "/health", "port": "probes"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/ready", "port": "probes"}


def test_without_a_probes_port_the_probes_ask_the_service_port(deploy_tools: dict[str, Path]) -> None:
    docs = render(deploy_tools, "-f", PRODUCTION, "--set", "config.probes.port=null")
    container = server_container(docs)
    assert "probes" not in {p["name"] for p in container["ports"]}
    assert container["livenessProbe"]["httpGet"] == {"path": "/health", "port": "http"}
    assert container["startupProbe"]["httpGet"] == {"path": "/health", "port": "http"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/ready", "port": "http"}
    assert rendered_config(docs)["probes"].get("port") is None  # helm drops a null: the service default


@pytest.mark.parametrize("port", ["8000", "9090"], ids=["service port", "metrics port"])
def test_a_probes_port_on_the_service_or_metrics_port_is_refused(deploy_tools: dict[str, Path], port: str) -> None:
    result = helm(deploy_tools, "template", "aql", "--set", f"config.probes.port={port}")
    assert result.returncode != 0
    assert "config.probes.port" in result.stderr


def test_containers_run_with_a_restrictive_security_context(docs: list[dict[str, Any]]) -> None:
    pods = [only(docs, "Deployment")["spec"]["template"]["spec"]]
    pods += [doc["spec"] for doc in find(docs, "Pod")]  # the `helm test` pod too
    for pod in pods:
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        assert pod["automountServiceAccountToken"] is False
        for container in pod["containers"]:
            context = container["securityContext"]
            assert context["runAsNonRoot"] is True
            assert isinstance(context["runAsUser"], int)
            assert context["runAsUser"] > 0
            assert context["readOnlyRootFilesystem"] is True
            assert context["allowPrivilegeEscalation"] is False
            assert context["capabilities"] == {"drop": ["ALL"]}
            assert context["seccompProfile"] == {"type": "RuntimeDefault"}


def test_pod_runs_the_image_entrypoint_with_the_mounted_config_file(docs: list[dict[str, Any]]) -> None:
    container = server_container(docs)
    assert "command" not in container  # the image's `aql-mcp serve --host 0.0.0.0`
    assert container["args"] == ["--config", CONFIG_FILE]
    mounts = {mount["mountPath"]: mount for mount in container["volumeMounts"]}
    assert mounts[CONFIG_FILE]["subPath"] == "config.yaml"
    assert mounts[CONFIG_FILE]["readOnly"] is True
    assert "/tmp" in mounts  # the only other writable place besides the state volume


def test_topology_spread_constraints_select_the_release_pods(docs: list[dict[str, Any]]) -> None:
    deployment = only(docs, "Deployment")
    constraints = deployment["spec"]["template"]["spec"]["topologySpreadConstraints"]
    assert {c["topologyKey"] for c in constraints} == {"topology.kubernetes.io/zone", "kubernetes.io/hostname"}
    for constraint in constraints:
        assert constraint["labelSelector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]


def test_the_helm_test_pod_is_not_selected_by_the_service(docs: list[dict[str, Any]]) -> None:
    selector = only(docs, "Service")["spec"]["selector"]
    (test_pod,) = find(docs, "Pod")
    assert test_pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    labels = test_pod["metadata"]["labels"]
    assert not all(labels.get(key) == value for key, value in selector.items())


# --- state: one writer on a ReadWriteOnce disk ---------------------------------------------------


def test_sqlite_state_lives_on_a_read_write_once_claim_with_one_recreated_replica(docs: list[dict[str, Any]]) -> None:
    deployment = only(docs, "Deployment")
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    claim = only(docs, "PersistentVolumeClaim")
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    assert volumes["state"]["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
    mounts = {m["name"]: m["mountPath"] for m in server_container(docs)["volumeMounts"]}
    assert mounts["state"] == STATE_PATH == rendered_config(docs)["store"]["path"]
    assert not find(docs, "HorizontalPodAutoscaler")


@pytest.mark.parametrize(
    ("setting", "volume"),
    [
        ("persistence.existingClaim=aql-state", {"persistentVolumeClaim": {"claimName": "aql-state"}}),
        ("persistence.enabled=false", {"emptyDir": {}}),
    ],
)
def test_state_volume_can_be_an_existing_claim_or_an_empty_dir(
    deploy_tools: dict[str, Path], setting: str, volume: dict[str, Any]
) -> None:
    docs = render(deploy_tools, "--set", setting)
    volumes = {v["name"]: v for v in only(docs, "Deployment")["spec"]["template"]["spec"]["volumes"]}
    assert volumes["state"] == {"name": "state", **volume}
    assert not find(docs, "PersistentVolumeClaim")


def test_disruption_budget_never_blocks_a_node_drain(docs: list[dict[str, Any]]) -> None:
    budget = only(docs, "PodDisruptionBudget")["spec"]
    assert budget["maxUnavailable"] == 1
    assert "minAvailable" not in budget
    assert budget["selector"]["matchLabels"] == only(docs, "Deployment")["spec"]["selector"]["matchLabels"]


@pytest.mark.parametrize(
    ("setting", "names"),
    [
        ("replicaCount=2", ("replicaCount", "store.engine=sqlite", "ReadWriteOnce")),
        ("autoscaling.enabled=true", ("autoscaling.enabled", "store.engine=sqlite", "ReadWriteOnce")),
    ],
)
def test_more_than_one_writer_is_refused_with_sqlite(
    deploy_tools: dict[str, Path], setting: str, names: tuple[str, ...]
) -> None:
    result = helm(deploy_tools, "template", "aql", "--set", setting)
    assert result.returncode != 0
    assert all(name in result.stderr for name in names), result.stderr


@pytest.mark.parametrize("setting", ["jwks_url", "introspection_url"])
def test_a_plain_http_idp_url_is_refused_at_install_unless_the_operator_opts_in(
    deploy_tools: dict[str, Path], setting: str
) -> None:
    """safeguards.check_safety refuses it at startup; the chart refuses it earlier, and never opts in itself."""
    url = f"--set=config.auth.{setting}=http://idp.example.com/endpoint"
    result = helm(deploy_tools, "template", "aql", "-f", PRODUCTION, url)
    assert result.returncode != 0
    assert f"config.auth.{setting}" in result.stderr, result.stderr

    opted_in = render(deploy_tools, "-f", PRODUCTION, url, "--set", "config.auth.allow_insecure_http=true")
    assert rendered_config(opted_in)["auth"]["allow_insecure_http"] is True


def test_a_plain_http_issuers_entry_is_refused_at_install_unless_the_operator_opts_in(
    deploy_tools: dict[str, Path], tmp_path: Path
) -> None:
    entry = {**ISSUER_ENTRY, "jwks_url": "http://idp.example.com/keys"}
    path = values_file(tmp_path, {"config": {"auth": {"issuers": [entry]}}})
    result = helm(deploy_tools, "template", "aql", "-f", PRODUCTION, "-f", path)
    assert result.returncode != 0
    assert "config.auth.issuers[0].jwks_url is plain http" in result.stderr, result.stderr

    opted_in = render(deploy_tools, "-f", PRODUCTION, "-f", path, "--set", "config.auth.allow_insecure_http=true")
    assert rendered_config(opted_in)["auth"]["issuers"] == [entry]


def test_the_chart_does_not_allow_a_plain_http_idp_by_default(default_docs: list[dict[str, Any]]) -> None:
    assert rendered_config(default_docs)["auth"].get("allow_insecure_http", False) is False


def test_postgres_runs_rolling_replicas_under_the_autoscaler_with_no_state_disk(
    postgres_docs: list[dict[str, Any]], deploy_tools: dict[str, Path], tmp_path: Path
) -> None:
    """issue 11: several replicas, RollingUpdate and the HPA once PostgreSQL is configured."""
    deployment = only(postgres_docs, "Deployment")
    assert "replicas" not in deployment["spec"]  # the HorizontalPodAutoscaler owns the count
    assert deployment["spec"]["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1},
    }
    hpa = only(postgres_docs, "HorizontalPodAutoscaler")
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (3, 10)
    assert hpa["spec"]["scaleTargetRef"]["name"] == deployment["metadata"]["name"]
    assert not find(postgres_docs, "PersistentVolumeClaim")
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    assert volumes["state"] == {"name": "state", "emptyDir": {}}
    kubernetes_validate(deploy_tools, postgres_docs, tmp_path)


def test_postgres_replicas_without_an_autoscaler_take_the_replica_count(deploy_tools: dict[str, Path]) -> None:
    docs = render(
        deploy_tools,
        "--set",
        "store.engine=postgres",
        "--set",
        "store.postgres.secretName=db",
        "--set",
        "replicaCount=3",
    )
    deployment = only(docs, "Deployment")
    assert deployment["spec"]["replicas"] == 3
    assert deployment["spec"]["strategy"]["type"] == "RollingUpdate"


def test_the_postgres_url_password_and_ca_come_from_secrets_never_the_config_map(
    postgres_docs: list[dict[str, Any]],
) -> None:
    env = {variable["name"]: variable for variable in server_container(postgres_docs)["env"]}
    for name, key in (
        ("AQL_MCP_STORE__URL", "url"),
        ("AQL_MCP_STORE__PASSWORD", "password"),
        ("AQL_MCP_STORE__LISTEN_URL", "listen-url"),
    ):
        assert env[name]["valueFrom"] == {"secretKeyRef": {"name": "aql-mcp-db", "key": key}}
        assert "value" not in env[name]
    store = rendered_config(postgres_docs)["store"]
    assert store["ssl_root_cert"] == "/etc/aql-mcp/postgres/ca.crt"
    assert store["statement_cache_size"] == 0
    assert not {"url", "password", "listen_url", "password_file"} & set(store)
    mounts = {m["name"]: m for m in server_container(postgres_docs)["volumeMounts"]}
    assert mounts["postgres-ca"]["mountPath"] == store["ssl_root_cert"]
    assert mounts["postgres-ca"]["readOnly"] is True
    volumes = {v["name"]: v for v in only(postgres_docs, "Deployment")["spec"]["template"]["spec"]["volumes"]}
    assert volumes["postgres-ca"]["secret"]["secretName"] == "aql-mcp-db-ca"
    assert "postgresql://" not in yaml.safe_dump_all(postgres_docs)


def test_postgres_without_its_secret_is_refused(deploy_tools: dict[str, Path]) -> None:
    result = helm(deploy_tools, "template", "aql", "--set", "store.engine=postgres")
    assert result.returncode != 0
    assert "store.postgres.secretName" in result.stderr


def test_sqlite_renders_no_database_settings_from_secrets(default_docs: list[dict[str, Any]]) -> None:
    names = {variable["name"] for variable in server_container(default_docs)["env"]}
    assert not names & {"AQL_MCP_STORE__URL", "AQL_MCP_STORE__PASSWORD", "AQL_MCP_STORE__LISTEN_URL"}


def test_network_policy_lets_the_replicas_reach_the_database(postgres_docs: list[dict[str, Any]]) -> None:
    egress = only(postgres_docs, "NetworkPolicy")["spec"]["egress"]
    database = [rule for rule in egress if {"port": 5432, "protocol": "TCP"} in rule.get("ports", [])]
    assert database == [{"ports": [{"port": 5432, "protocol": "TCP"}], "to": [{"ipBlock": {"cidr": "10.30.4.0/24"}}]}]


def test_the_rendered_postgres_config_file_is_accepted_by_check_config(
    postgres_docs: list[dict[str, Any]], tmp_path: Path
) -> None:
    config = only(postgres_docs, "ConfigMap")["data"]["config.yaml"]
    secrets = {
        "AQL_MCP_STORE__URL": "postgresql://aql_mcp@db.example.com:5432/aql_mcp",
        "AQL_MCP_STORE__PASSWORD": "from-the-secret",
        "AQL_MCP_STORE__LISTEN_URL": "postgresql://aql_mcp@db-direct.example.com:5432/aql_mcp",
        "AQL_MCP_AUTH__INTROSPECTION_CLIENT_SECRET": "from-the-secret",
    }
    result = check_config(config, {**pod_environment(postgres_docs), **secrets}, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


# --- shutdown -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("drain", "grace", "timeout"), [(5.0, 20.0, 30.0), (0.5, 7.25, 12.1), (10.0, 30.0, 45.0), (0.0, 0.0, 0.5)]
)
def test_termination_grace_period_exceeds_drain_plus_grace_plus_tool_timeout(
    deploy_tools: dict[str, Path], drain: float, grace: float, timeout: float
) -> None:
    docs = render(
        deploy_tools,
        "--set-json",
        f'config.shutdown={{"drain_seconds": {drain}, "grace_seconds": {grace}}}',
        "--set-json",
        f"config.limits.tool_timeout_seconds={timeout}",
    )
    period = only(docs, "Deployment")["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert isinstance(period, int)
    assert period > drain + grace + timeout
    assert period == math.ceil(drain + grace + timeout + 5)


def test_production_values_give_the_longer_grace_period(production_docs: list[dict[str, Any]]) -> None:
    config = rendered_config(production_docs)
    budget = config["shutdown"]["drain_seconds"] + config["shutdown"]["grace_seconds"]
    budget += config["limits"]["tool_timeout_seconds"]
    period = only(production_docs, "Deployment")["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert period > budget


# --- the config file and the secrets ------------------------------------------------------------


def pod_environment(docs: list[dict[str, Any]]) -> dict[str, str]:
    """The container's environment, with a made-up value where the kubelet would read a Secret."""
    env = {}
    for variable in server_container(docs).get("env", []):
        env[variable["name"]] = variable.get("value", f"from-secret-{variable['name'].lower()}")
    return env


def check_config(config: str, env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "config.yaml"
    path.write_text(config, encoding="utf-8")
    clean = {k: v for k, v in os.environ.items() if not k.upper().startswith("AQL_MCP_")}
    command = [str(Path(sys.executable).parent / "aql-mcp"), "check-config", "--config", str(path)]
    return subprocess.run(command, capture_output=True, text=True, env={**clean, **env}, timeout=60, check=False)


def test_production_config_file_is_accepted_by_check_config(
    production_docs: list[dict[str, Any]], tmp_path: Path
) -> None:
    config = only(production_docs, "ConfigMap")["data"]["config.yaml"]
    result = check_config(config, pod_environment(production_docs), tmp_path)
    assert result.returncode == 0, result.stderr
    assert "dev=False" in result.stdout
    auth = rendered_config(production_docs)["auth"]
    assert all(auth.get(name) for name in ("jwks_url", "issuer", "audience"))


def test_a_config_file_with_an_issuers_entry_is_accepted_by_check_config(
    deploy_tools: dict[str, Path], tmp_path: Path
) -> None:
    path = values_file(tmp_path, {"config": {"auth": {"issuers": [ISSUER_ENTRY], "delegation": {"refuse": ["x"]}}}})
    docs = render(deploy_tools, "-f", PRODUCTION, "-f", path)
    result = check_config(only(docs, "ConfigMap")["data"]["config.yaml"], pod_environment(docs), tmp_path)
    assert result.returncode == 0, result.stderr
    assert rendered_config(docs)["auth"]["issuers"] == [ISSUER_ENTRY]


def test_default_config_file_is_accepted_once_an_idp_is_given(
    default_docs: list[dict[str, Any]], tmp_path: Path
) -> None:
    """The defaults name no IdP, so the service refuses to start (NOTES.txt says so); the file
    itself is valid: with the IdP settings from the environment check-config accepts it."""
    config = only(default_docs, "ConfigMap")["data"]["config.yaml"]
    env = pod_environment(default_docs)
    assert check_config(config, env, tmp_path).returncode == 2
    idp = {
        "AQL_MCP_AUTH__JWKS_URL": "https://idp.example.com/jwks",
        "AQL_MCP_AUTH__ISSUER": "https://idp.example.com",
        "AQL_MCP_AUTH__AUDIENCE": "https://mcp.example.com/mcp",
    }
    result = check_config(config, {**env, **idp}, tmp_path)
    assert result.returncode == 0, result.stderr


def test_rendered_config_never_turns_on_development_mode(docs: list[dict[str, Any]]) -> None:
    config = rendered_config(docs)
    assert config["server"]["dev"] is False
    assert config["server"]["host"] == "0.0.0.0"
    assert not any(name.upper() == "AQL_MCP_SERVER__DEV" for name in pod_environment(docs))


def test_secrets_are_referenced_and_never_rendered(deploy_tools: dict[str, Path]) -> None:
    secret_looking = "s3cr3t-qx7vp2mn9klw"  # a Secret's name that looks like a value
    docs = render(
        deploy_tools,
        "-f",
        PRODUCTION,
        "--set",
        f"secrets.introspectionClientSecret.name={secret_looking}",
        "--set-json",
        f'extraSecretEnv=[{{"name": "AQL_MCP_STORE__URL", "secretName": "{secret_looking}", "key": "dsn"}}]',
    )
    env = {variable["name"]: variable for variable in server_container(docs)["env"]}
    for name, key in (("AQL_MCP_AUTH__INTROSPECTION_CLIENT_SECRET", "client-secret"), ("AQL_MCP_STORE__URL", "dsn")):
        assert "value" not in env[name]
        assert env[name]["valueFrom"] == {"secretKeyRef": {"name": secret_looking, "key": key}}
    text = yaml.safe_dump_all(docs)
    assert text.count(secret_looking) == 2  # the two secretKeyRefs, nowhere else
    config_map = only(docs, "ConfigMap")["data"]["config.yaml"]
    for setting in ("introspection_client_secret", "hs256_secret", secret_looking):
        assert setting not in config_map
    assert not find(docs, "Secret")
    volumes = {v["name"]: v for v in only(docs, "Deployment")["spec"]["template"]["spec"]["volumes"]}
    assert volumes["opaque-tokens"]["secret"]["secretName"] == "aql-mcp-opaque-tokens"
    assert rendered_config(docs)["auth"]["opaque_tokens_file"] == "/etc/aql-mcp/secrets/opaque-tokens.yaml"


# --- the request-state key (modern era, MRTR) ----------------------------------------------------
# basic/patterns/mrtr "Server Requirements (Basic Workflow)": a requestState that steers business
# logic MUST be integrity-protected, and the retry may land on any replica, so every pod reads the
# same HMAC key from one Secret, never from the ConfigMap or the pod spec.

REQUEST_STATE_SECRET = "aql-aql-mcp-request-state"  # <fullname>-request-state for release "aql"


def env_of(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {variable["name"]: variable for variable in server_container(docs)["env"]}


def generated_key(docs: list[dict[str, Any]]) -> str:
    (secret,) = [doc for doc in find(docs, "Secret") if doc["metadata"]["name"] == REQUEST_STATE_SECRET]
    return base64.b64decode(secret["data"]["request-state-key"]).decode()


def test_the_default_render_generates_the_request_state_key_secret_and_reads_it_from_there(
    default_docs: list[dict[str, Any]],
) -> None:
    assert rendered_config(default_docs)["mcp"]["modern_era"] is True
    key = generated_key(default_docs)
    assert re.fullmatch(r"[A-Za-z0-9]{64}", key)  # 64 random alphanumerics, past the service's 32-byte floor
    variable = env_of(default_docs)["AQL_MCP_MCP__REQUEST_STATE_KEY"]
    assert variable == {
        "name": "AQL_MCP_MCP__REQUEST_STATE_KEY",
        "valueFrom": {"secretKeyRef": {"name": REQUEST_STATE_SECRET, "key": "request-state-key"}},
    }
    (secret,) = find(default_docs, "Secret")
    assert secret["type"] == "Opaque"
    assert secret["metadata"]["labels"]["app.kubernetes.io/instance"] == "aql"
    # Removed by `helm uninstall` with the pods: it protects nothing older than the state's TTL.
    assert "helm.sh/resource-policy" not in secret["metadata"].get("annotations", {})


def test_a_named_request_state_secret_replaces_the_generated_one(deploy_tools: dict[str, Path]) -> None:
    docs = render(
        deploy_tools,
        "--set",
        "secrets.requestStateKey.name=platform-request-state",
        "--set",
        "secrets.requestStateKey.key=hmac",
    )
    assert not find(docs, "Secret")
    variable = env_of(docs)["AQL_MCP_MCP__REQUEST_STATE_KEY"]
    assert variable["valueFrom"] == {"secretKeyRef": {"name": "platform-request-state", "key": "hmac"}}
    assert "value" not in variable


def test_the_production_example_reads_the_key_from_the_platforms_secret(production_docs: list[dict[str, Any]]) -> None:
    variable = env_of(production_docs)["AQL_MCP_MCP__REQUEST_STATE_KEY"]
    assert variable["valueFrom"] == {"secretKeyRef": {"name": "aql-mcp-request-state", "key": "request-state-key"}}


def test_the_key_never_reaches_the_config_map_or_the_pod_spec(default_docs: list[dict[str, Any]]) -> None:
    key = generated_key(default_docs)
    encoded = base64.b64encode(key.encode()).decode()
    others = [doc for doc in default_docs if doc["kind"] != "Secret"]
    text = yaml.safe_dump_all(others)
    assert key not in text
    assert encoded not in text
    config = rendered_config(default_docs)
    assert set(config["mcp"]) == {
        "modern_era",
        "request_state_ttl_seconds",
        "task_ttl_seconds",
        "max_tasks_per_principal",
    }
    assert "request_state_key" not in only(default_docs, "ConfigMap")["data"]["config.yaml"]
    # No checksum of the key on the pod either: a hash of the secret would sit in every pod spec.
    annotations = only(default_docs, "Deployment")["spec"]["template"]["metadata"]["annotations"]
    assert set(annotations) == {"checksum/config"}


@pytest.mark.parametrize("values", [[], ["-f", PRODUCTION]], ids=["generated", "named"])
def test_the_config_map_never_holds_a_request_state_key(
    deploy_tools: dict[str, Path], values: list[str | Path]
) -> None:
    docs = render(deploy_tools, *values, "--set", "secrets.requestStatePreviousKey.name=old-request-state")
    mcp = rendered_config(docs)["mcp"]
    assert "request_state_key" not in mcp
    assert "request_state_previous_key" not in mcp
    assert "old-request-state" not in only(docs, "ConfigMap")["data"]["config.yaml"]


def test_without_the_modern_era_no_key_secret_is_generated(deploy_tools: dict[str, Path]) -> None:
    docs = render(deploy_tools, "--set", "config.mcp.modern_era=false")
    assert not find(docs, "Secret")
    assert not {"AQL_MCP_MCP__REQUEST_STATE_KEY", "AQL_MCP_MCP__REQUEST_STATE_PREVIOUS_KEY"} & set(env_of(docs))
    assert rendered_config(docs)["mcp"]["modern_era"] is False


def test_the_previous_key_is_read_only_when_its_secret_is_named(
    default_docs: list[dict[str, Any]], deploy_tools: dict[str, Path], tmp_path: Path
) -> None:
    assert "AQL_MCP_MCP__REQUEST_STATE_PREVIOUS_KEY" not in env_of(default_docs)
    docs = render(
        deploy_tools,
        "-f",
        PRODUCTION,
        "--set",
        "secrets.requestStateKey.name=request-state-2",
        "--set",
        "secrets.requestStatePreviousKey.name=aql-mcp-request-state",
        "--set",
        "secrets.requestStatePreviousKey.key=request-state-key",
    )
    env = env_of(docs)
    assert env["AQL_MCP_MCP__REQUEST_STATE_KEY"]["valueFrom"]["secretKeyRef"]["name"] == "request-state-2"
    assert env["AQL_MCP_MCP__REQUEST_STATE_PREVIOUS_KEY"]["valueFrom"] == {
        "secretKeyRef": {"name": "aql-mcp-request-state", "key": "request-state-key"}
    }
    kubernetes_validate(deploy_tools, docs, tmp_path)


@pytest.mark.parametrize(
    "settings",
    [
        ["secrets.requestStatePreviousKey.name=aql-aql-mcp-request-state"],
        ["secrets.requestStateKey.name=rsk", "secrets.requestStatePreviousKey.name=rsk"],
    ],
    ids=["the generated secret", "a named secret"],
)
def test_a_previous_key_that_is_the_current_key_is_refused(deploy_tools: dict[str, Path], settings: list[str]) -> None:
    """Same Secret, same key: the rotation was not done, the old states would not verify."""
    args = [arg for setting in settings for arg in ("--set", setting)]
    args += ["--set", "secrets.requestStatePreviousKey.key=request-state-key"]
    result = helm(deploy_tools, "template", "aql", *args)
    assert result.returncode != 0
    assert "secrets.requestStatePreviousKey" in result.stderr


def render_against(tools: dict[str, Path], api: KubeApi, tmp_path: Path, *args: str) -> list[dict[str, Any]]:
    """`helm template --dry-run=server`: rendered with `lookup` answered by the API server."""
    kubeconfig = api.kubeconfig(tmp_path, NAMESPACE)
    command = [str(tools["helm"]), "template", "aql", str(CHART), "--namespace", NAMESPACE, *args]
    command += ["--dry-run=server", "--disable-openapi-validation", "--kubeconfig", str(kubeconfig)]
    # Its own HOME: client-go caches discovery per server under ~/.kube/cache.
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("KUBE", "HELM_"))}
    env = {**clean, "HOME": str(tmp_path)}
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.load_all(result.stdout, Loader=StrictLoader) if doc]


def released_secret(name: str, data: dict[str, str]) -> dict[str, Any]:
    """A Secret as an earlier revision of release "aql" left it (Helm's ownership marks included)."""
    encoded = {key: base64.b64encode(value.encode()).decode() for key, value in data.items()}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": {"app.kubernetes.io/managed-by": "Helm"},
            "annotations": {"meta.helm.sh/release-name": "aql", "meta.helm.sh/release-namespace": NAMESPACE},
        },
        "data": encoded,
    }


def test_an_upgrade_keeps_the_generated_key(deploy_tools: dict[str, Path], tmp_path: Path) -> None:
    """States handed out before `helm upgrade` still verify after it: lookup finds the key and reuses it."""
    earlier = "E" * 64
    secrets = {REQUEST_STATE_SECRET: released_secret(REQUEST_STATE_SECRET, {"request-state-key": earlier})}
    with kube_api(secrets) as api:
        docs = render_against(deploy_tools, api, tmp_path)
    assert generated_key(docs) == earlier
    assert f"/api/v1/namespaces/{NAMESPACE}/secrets/{REQUEST_STATE_SECRET}" in api.requests


def test_a_first_install_draws_a_new_key_per_release(deploy_tools: dict[str, Path], tmp_path: Path) -> None:
    with kube_api({}) as api:
        first = generated_key(render_against(deploy_tools, api, tmp_path))
        second = generated_key(render_against(deploy_tools, api, tmp_path))
    assert re.fullmatch(r"[A-Za-z0-9]{64}", first)
    assert first != second  # random, not derived from the release


def test_a_generated_secret_without_the_key_gets_a_new_one(deploy_tools: dict[str, Path], tmp_path: Path) -> None:
    """secrets.requestStateKey.key renamed: the old entry is not the key, a new one is drawn."""
    secrets = {REQUEST_STATE_SECRET: released_secret(REQUEST_STATE_SECRET, {"old-name": "E" * 64})}
    with kube_api(secrets) as api:
        docs = render_against(deploy_tools, api, tmp_path, "--set", "secrets.requestStateKey.key=hmac")
    (secret,) = find(docs, "Secret")
    assert set(secret["data"]) == {"hmac"}
    key = base64.b64decode(secret["data"]["hmac"]).decode()
    assert re.fullmatch(r"[A-Za-z0-9]{64}", key)
    assert key != "E" * 64


def test_the_service_refuses_postgres_replicas_without_the_key_and_takes_it_from_the_secret(
    default_docs: list[dict[str, Any]], tmp_path: Path
) -> None:
    """safeguards: with a PostgreSQL store (several replicas) the modern era outside development
    mode needs mcp.request_state_key; the chart's Secret provides it."""
    config = only(default_docs, "ConfigMap")["data"]["config.yaml"]
    production = {
        "AQL_MCP_AUTH__JWKS_URL": "https://idp.example.com/jwks",
        "AQL_MCP_AUTH__ISSUER": "https://idp.example.com",
        "AQL_MCP_AUTH__AUDIENCE": "https://mcp.example.com/mcp",
        "AQL_MCP_STORE__URL": "postgresql://aql@db.example.com/aql",
    }
    env = pod_environment(default_docs)
    without = {name: value for name, value in env.items() if name != "AQL_MCP_MCP__REQUEST_STATE_KEY"}
    refused = check_config(config, {**without, **production}, tmp_path)
    assert refused.returncode == 2
    assert "mcp.request_state_key" in refused.stdout + refused.stderr
    key = {"AQL_MCP_MCP__REQUEST_STATE_KEY": generated_key(default_docs)}
    accepted = check_config(config, {**without, **production, **key}, tmp_path)
    assert accepted.returncode == 0, accepted.stdout + accepted.stderr
    assert generated_key(default_docs) not in accepted.stdout + accepted.stderr


# --- values.schema.json -------------------------------------------------------------------------


BROKEN_VALUES = {
    "secret value in config": {"config": {"auth": {"introspection_client_secret": "hunter2"}}},
    "hs256 secret in config": {"config": {"auth": {"hs256_secret": "hunter2"}}},
    "development mode": {"config": {"server": {"dev": True}}},
    "development mode by environment": {"extraEnv": [{"name": "AQL_MCP_SERVER__DEV", "value": "true"}]},
    "replicas as text": {"replicaCount": "two"},
    "unknown log level": {"config": {"logging": {"level": "loud"}}},
    "writable root filesystem": {"securityContext": {"readOnlyRootFilesystem": False}},
    "root user": {"podSecurityContext": {"runAsNonRoot": False}},
    "unknown engine": {"store": {"engine": "mysql"}},
    "database URL in config": {"config": {"store": {"url": "postgresql://u:p@db/x"}}},
    "database password in config": {"config": {"store": {"password": "hunter2"}}},
    "unknown ssl mode": {"config": {"store": {"ssl_mode": "sometimes"}}},
    "unknown setting": {"config": {"limits": {"tool_timeout": 30}}},
    "unknown top-level key": {"replicas": 1},
    "wildcard origin": {"config": {"http": {"allowed_origins": ["*"]}}},
    "request-state key in config": {"config": {"mcp": {"request_state_key": "k" * 48}}},
    "previous request-state key in config": {"config": {"mcp": {"request_state_previous_key": "k" * 48}}},
    "request-state key as a plain variable": {
        "extraEnv": [{"name": "AQL_MCP_MCP__REQUEST_STATE_KEY", "value": "k" * 48}]
    },
    "request-state key past secrets.requestStateKey": {
        "extraSecretEnv": [{"name": "aql_mcp_mcp__request_state_key", "secretName": "s", "key": "k"}]
    },
    "previous request-state key as a plain variable": {
        "extraEnv": [{"name": "AQL_MCP_MCP__REQUEST_STATE_PREVIOUS_KEY", "value": "k" * 48}]
    },
    "request-state ttl too short": {"config": {"mcp": {"request_state_ttl_seconds": 10}}},
    "request-state secret without a key": {"secrets": {"requestStateKey": {"name": "rsk", "key": ""}}},
    "client secret in an issuers entry": {
        "config": {"auth": {"issuers": [{**ISSUER_ENTRY, "introspection_client_secret": "s"}]}}
    },
    "issuers entry without audiences": {"config": {"auth": {"issuers": [{**ISSUER_ENTRY, "audiences": []}]}}},
    "issuers entry with HS256": {"config": {"auth": {"issuers": [{**ISSUER_ENTRY, "algorithms": ["HS256"]}]}}},
}


@pytest.mark.parametrize("values", BROKEN_VALUES.values(), ids=BROKEN_VALUES.keys())
def test_broken_values_are_rejected_by_the_schema(
    deploy_tools: dict[str, Path], values: dict[str, Any], tmp_path: Path
) -> None:
    path = values_file(tmp_path, values)
    for command in (["lint", "--strict"], ["template", "aql"]):
        result = helm(deploy_tools, *command, "-f", path)
        assert result.returncode != 0, f"helm {command[0]} accepted {values}"
        assert "schema" in (result.stdout + result.stderr)


def test_values_yaml_passes_its_own_schema() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text(encoding="utf-8"))
    for path in (CHART / "values.yaml", PRODUCTION):
        values = yaml.safe_load(path.read_text(encoding="utf-8"))
        merged = _deep_merge(yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8")), values)
        jsonschema.validate({k: _drop_nulls(v) for k, v in merged.items()}, schema)


def _deep_merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in top.items():
        both = isinstance(value, dict) and isinstance(merged.get(key), dict)
        merged[key] = _deep_merge(merged[key], value) if both else value
    return merged


def _drop_nulls(value: Any) -> Any:
    # Helm drops null values before it validates; so does this copy.
    if isinstance(value, dict):
        return {k: _drop_nulls(v) for k, v in value.items() if v is not None}
    return value


# --- values.yaml against the service and the README ---------------------------------------------


def test_config_values_map_one_to_one_onto_the_service_settings() -> None:
    """Every setting is in `config:` under its own name with the service's default, or the chart owns it."""
    config = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))["config"]
    settings = field_defaults()
    offered = {(section, name) for section, fields in config.items() for name in fields}
    known = {(section, name) for section, fields in settings.items() for name in fields}
    assert offered - known == set(), "values offer settings the service does not have"
    assert known - offered - CHART_OWNED == set(), "settings the chart neither offers nor owns"
    assert offered & CHART_OWNED == set()
    for section, name in offered - set(CHART_DEFAULTS):
        assert config[section][name] == settings[section][name], f"{section}.{name}: default differs"
    for (section, name), value in CHART_DEFAULTS.items():
        assert config[section][name] == value


# Where the chart's default differs from the service's, on purpose: in a cluster /metrics gets a port
# of its own (issue 12), so Prometheus never shares the service port and a policy can tell them apart.
# The chart serves the modern era (issue 13) whatever the service's default, with the key it delivers.
# The kubelet probes a port of its own (issue 27), so a connection flood on the service port never
# fails a liveness probe.
CHART_DEFAULTS = {("metrics", "port"): 9090, ("mcp", "modern_era"): True, ("probes", "port"): PROBES_PORT}


def leaf_keys(values: dict[str, Any], prefix: str = "") -> Iterator[str]:
    for key, value in values.items():
        if isinstance(value, dict) and value:
            yield from leaf_keys(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}"


def readme_keys() -> list[str]:
    readme = (CHART / "README.md").read_text(encoding="utf-8")
    return re.findall(r"^\| `([^`]+)` \|", readme, flags=re.MULTILINE)


def test_readme_values_table_lists_every_key_of_values_yaml() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))
    documented = readme_keys()
    assert len(documented) == len(set(documented)), "a key is documented twice"
    assert set(documented) == set(leaf_keys(values))


def test_readme_names_the_setting_each_config_value_becomes() -> None:
    readme = (CHART / "README.md").read_text(encoding="utf-8")
    for key in (k for k in readme_keys() if k.startswith("config.")):
        setting = key.removeprefix("config.")
        row = next(line for line in readme.splitlines() if line.startswith(f"| `{key}` |"))
        assert f"`{setting}`" in row, f"{key}: the row does not name the setting {setting}"


def test_chart_app_version_is_the_package_version() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text(encoding="utf-8"))
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert f'version = "{chart["appVersion"]}"' in pyproject


# --- ServiceMonitor and NetworkPolicy -----------------------------------------------------------

# The fields this chart renders, as the Prometheus Operator's ServiceMonitor CRD
# (monitoring.coreos.com/v1) declares them; anything else is refused here on purpose.
_DURATION = r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"
_LABEL_SELECTOR = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "matchLabels": {"type": "object", "additionalProperties": {"type": "string"}},
        "matchExpressions": {"type": "array"},
    },
}
SERVICE_MONITOR_SCHEMA = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "ServiceMonitor"},
        "spec": {
            "type": "object",
            "additionalProperties": False,
            "required": ["selector", "endpoints"],
            "properties": {
                "selector": _LABEL_SELECTOR,
                "namespaceSelector": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "any": {"type": "boolean"},
                        "matchNames": {"type": "array", "items": {"type": "string"}},
                    },
                },
                "endpoints": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "port": {"type": "string"},
                            "path": {"type": "string", "pattern": "^/"},
                            "scheme": {"enum": ["http", "https", "HTTP", "HTTPS"]},
                            "interval": {"type": "string", "pattern": _DURATION},
                            "scrapeTimeout": {"type": "string", "pattern": _DURATION},
                        },
                    },
                },
            },
        },
    },
}


def test_service_monitor_matches_the_crd_fields_and_the_service(production_docs: list[dict[str, Any]]) -> None:
    monitor = only(production_docs, "ServiceMonitor")
    jsonschema.validate(monitor, SERVICE_MONITOR_SCHEMA)
    service = only(production_docs, "Service")
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] in {port["name"] for port in service["spec"]["ports"]}
    assert endpoint["path"] == "/metrics"
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert all(service["metadata"]["labels"].get(k) == v for k, v in selector.items())
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    # Prometheus refuses a scrape timeout longer than the interval.
    assert seconds(endpoint["scrapeTimeout"]) <= seconds(endpoint["interval"])


def seconds(duration: str) -> float:
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
    return sum(int(n) * units[unit] for n, unit in re.findall(r"([0-9]+)(ms|[smhdwy])", duration))


def test_service_monitor_follows_a_separate_metrics_port(metrics_port_docs: list[dict[str, Any]]) -> None:
    (endpoint,) = only(metrics_port_docs, "ServiceMonitor")["spec"]["endpoints"]
    assert endpoint["port"] == "metrics"
    service_ports = {p["name"]: p for p in only(metrics_port_docs, "Service")["spec"]["ports"]}
    assert service_ports["metrics"]["targetPort"] == "metrics"
    container_ports = {p["name"]: p["containerPort"] for p in server_container(metrics_port_docs)["ports"]}
    assert container_ports == {"http": 8000, "metrics": METRICS_PORT, "probes": PROBES_PORT}
    assert rendered_config(metrics_port_docs)["metrics"]["port"] == METRICS_PORT
    ingress = only(metrics_port_docs, "NetworkPolicy")["spec"]["ingress"]
    assert [{"port": "metrics", "protocol": "TCP"}] in [rule["ports"] for rule in ingress]


def test_metrics_have_a_port_of_their_own_by_default(default_docs: list[dict[str, Any]]) -> None:
    port = rendered_config(default_docs)["metrics"]["port"]
    assert port not in (None, 8000)
    container_ports = {p["name"]: p["containerPort"] for p in server_container(default_docs)["ports"]}
    assert container_ports == {"http": 8000, "metrics": port, "probes": PROBES_PORT}
    service_ports = {p["name"]: p["port"] for p in only(default_docs, "Service")["spec"]["ports"]}
    assert service_ports == {"http": 8000, "metrics": port}


def test_without_metrics_peers_the_metrics_port_admits_the_service_peers(deploy_tools: dict[str, Path]) -> None:
    docs = render(deploy_tools, "-f", PRODUCTION, "--set", "networkPolicy.metricsFrom=null")
    _, metrics = only(docs, "NetworkPolicy")["spec"]["ingress"]
    production = yaml.safe_load(PRODUCTION.read_text(encoding="utf-8"))
    assert metrics["from"] == production["networkPolicy"]["ingressFrom"]


def test_metrics_on_the_service_port_need_no_metrics_rule(deploy_tools: dict[str, Path]) -> None:
    docs = render(deploy_tools, "-f", PRODUCTION, "--set", "config.metrics.port=null")
    (ingress,) = only(docs, "NetworkPolicy")["spec"]["ingress"]
    assert ingress["ports"] == [{"port": "http", "protocol": "TCP"}]
    # ... but Prometheus' peers join the service port's (issue 15: ingress limited to the gateway).
    production = yaml.safe_load(PRODUCTION.read_text(encoding="utf-8"))
    assert all(peer in ingress["from"] for peer in production["networkPolicy"]["metricsFrom"])
    (endpoint,) = only(docs, "ServiceMonitor")["spec"]["endpoints"]
    assert endpoint["port"] == "http"


def test_service_monitor_is_refused_when_the_service_serves_no_metrics(deploy_tools: dict[str, Path]) -> None:
    result = helm(
        deploy_tools,
        "template",
        "aql",
        "--set",
        "metrics.serviceMonitor.enabled=true",
        "--set",
        "config.metrics.enabled=false",
    )
    assert result.returncode != 0
    assert "config.metrics.enabled" in result.stderr


def test_service_monitor_schema_refuses_a_field_the_crd_does_not_have() -> None:
    monitor = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": {"name": "x"},
        "spec": {"selector": {}, "endpoints": [{"port": "http", "scrapeInterval": "30s"}]},
    }
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(monitor, SERVICE_MONITOR_SCHEMA)


def test_service_monitor_is_optional(default_docs: list[dict[str, Any]]) -> None:
    assert not find(default_docs, "ServiceMonitor")
    assert not find(default_docs, "NetworkPolicy")


def test_network_policy_admits_the_service_port_and_dns(production_docs: list[dict[str, Any]]) -> None:
    policy = only(production_docs, "NetworkPolicy")["spec"]
    assert (
        policy["podSelector"]["matchLabels"] == only(production_docs, "Deployment")["spec"]["selector"]["matchLabels"]
    )
    assert policy["policyTypes"] == ["Ingress", "Egress"]
    service, metrics = policy["ingress"]
    assert service["ports"] == [{"port": "http", "protocol": "TCP"}]
    assert service["from"][0]["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"] == "gateway"
    # Prometheus reaches the metrics port only, and the gateway does not reach it.
    assert metrics["ports"] == [{"port": "metrics", "protocol": "TCP"}]
    (prometheus,) = metrics["from"]
    assert prometheus["podSelector"]["matchLabels"]["app.kubernetes.io/name"] == "prometheus"
    dns = policy["egress"][0]["ports"]
    assert {"port": 53, "protocol": "UDP"} in dns


# --- NetworkPolicy paths: who reaches the pod, where the pod may go (issue 15) --------------------
#
# A small evaluator of the NetworkPolicy semantics the chart uses (networking.k8s.io/v1): a rule
# without peers admits every peer, a rule without ports every port; a peer is an ipBlock, a
# namespaceSelector, a podSelector (in the policy's namespace) or both selectors together. Named
# ports resolve through the server container's ports. Each path below is asked of the rendered
# policy, with a control that the evaluator does refuse a path the policy leaves out.

GATEWAY = {"namespace": {"kubernetes.io/metadata.name": "gateway"}, "pod": {"app": "envoy"}}
PROMETHEUS = {
    "namespace": {"kubernetes.io/metadata.name": "monitoring"},
    "pod": {"app.kubernetes.io/name": "prometheus"},
}
OTEL_COLLECTOR = {
    "namespace": {"kubernetes.io/metadata.name": "monitoring"},
    "pod": {"app.kubernetes.io/name": "otel-collector"},
}
KUBE_DNS = {"namespace": {"kubernetes.io/metadata.name": "kube-system"}, "pod": {"k8s-app": "kube-dns"}}
NEIGHBOUR = {"namespace": {"kubernetes.io/metadata.name": NAMESPACE}, "pod": {"app": "someone-else"}}


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    assert set(selector) <= {"matchLabels"}, "the evaluator knows matchLabels only"
    return all(labels.get(key) == value for key, value in selector.get("matchLabels", {}).items())


def _peer_matches(peer: dict[str, Any], endpoint: dict[str, Any]) -> bool:
    if "ipBlock" in peer:
        block = peer["ipBlock"]
        address = endpoint.get("ip")
        if address is None:
            return False
        inside = ipaddress.ip_address(address) in ipaddress.ip_network(block["cidr"])
        return inside and not any(
            ipaddress.ip_address(address) in ipaddress.ip_network(e) for e in block.get("except", [])
        )
    if "namespace" not in endpoint:
        return False
    if "namespaceSelector" in peer:
        namespace_ok = _selects(peer["namespaceSelector"], endpoint["namespace"])
    else:
        namespace_ok = endpoint["namespace"].get("kubernetes.io/metadata.name") == NAMESPACE
    pod_ok = _selects(peer.get("podSelector", {}), endpoint["pod"])
    return namespace_ok and pod_ok


def _port_matches(rule: dict[str, Any], port: int, protocol: str, names: dict[str, int]) -> bool:
    if "ports" not in rule:
        return True
    return any(
        entry.get("protocol", "TCP") == protocol and names.get(entry["port"], entry["port"]) == port
        for entry in rule["ports"]
    )


def admits_ingress(docs: list[dict[str, Any]], peer: dict[str, Any], port: str, protocol: str = "TCP") -> bool:
    """Whether the rendered policy lets `peer` open a connection to the server pod's `port` (a name)."""
    policy = only(docs, "NetworkPolicy")["spec"]
    names = {p["name"]: p["containerPort"] for p in server_container(docs)["ports"]}
    number = names[port]
    return any(
        _port_matches(rule, number, protocol, names)
        and ("from" not in rule or any(_peer_matches(p, peer) for p in rule["from"]))
        for rule in policy.get("ingress", [])
    )


def admits_egress(docs: list[dict[str, Any]], peer: dict[str, Any], port: int, protocol: str = "TCP") -> bool:
    """Whether the rendered policy lets the server pod open a connection to `peer` on `port`."""
    policy = only(docs, "NetworkPolicy")["spec"]
    if "Egress" not in policy["policyTypes"]:
        return True
    return any(
        _port_matches(rule, port, protocol, {})
        and ("to" not in rule or any(_peer_matches(p, peer) for p in rule["to"]))
        for rule in policy.get("egress", [])
    )


def helm_test_pod(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (pod,) = find(docs, "Pod")
    return {"namespace": {"kubernetes.io/metadata.name": NAMESPACE}, "pod": pod["metadata"]["labels"]}


def otlp_port(docs: list[dict[str, Any]]) -> int:
    endpoint = urllib.parse.urlsplit(rendered_config(docs)["tracing"]["otlp_endpoint"])
    return endpoint.port or {"https": 443, "http": 80}[endpoint.scheme]


@pytest.fixture(params=["production", "postgres"])
def restricted_docs(request: pytest.FixtureRequest) -> list[dict[str, Any]]:
    """The production examples, whose policy limits ingress to the gateway and restricts egress."""
    rendered: list[dict[str, Any]] = request.getfixturevalue(f"{request.param}_docs")
    return rendered


def test_the_gateway_reaches_the_service_port_and_nobody_else_in_the_namespace_does(
    restricted_docs: list[dict[str, Any]],
) -> None:
    assert admits_ingress(restricted_docs, GATEWAY, "http")
    assert not admits_ingress(restricted_docs, NEIGHBOUR, "http")
    assert not admits_ingress(restricted_docs, GATEWAY, "metrics")


def test_the_helm_test_pod_the_readme_runs_reaches_the_service_port(restricted_docs: list[dict[str, Any]]) -> None:
    """The README says `helm test`: its pod must get through the policy it installed."""
    assert admits_ingress(restricted_docs, helm_test_pod(restricted_docs), "http")
    # Its labels open nothing else: not the metrics port, and not the Service's selector.
    assert not admits_ingress(restricted_docs, helm_test_pod(restricted_docs), "metrics")


def test_prometheus_reaches_the_metrics_port_while_ingress_is_limited_to_the_gateway(
    restricted_docs: list[dict[str, Any]],
) -> None:
    (endpoint,) = only(restricted_docs, "ServiceMonitor")["spec"]["endpoints"]
    assert endpoint["port"] == "metrics"
    assert admits_ingress(restricted_docs, PROMETHEUS, "metrics")
    assert not admits_ingress(restricted_docs, PROMETHEUS, "http")


def test_prometheus_reaches_metrics_served_on_the_service_port(deploy_tools: dict[str, Path]) -> None:
    docs = render(deploy_tools, "-f", PRODUCTION, "--set", "config.metrics.port=null")
    (endpoint,) = only(docs, "ServiceMonitor")["spec"]["endpoints"]
    assert endpoint["port"] == "http"
    assert admits_ingress(docs, PROMETHEUS, "http")
    assert admits_ingress(docs, helm_test_pod(docs), "http")
    assert not admits_ingress(docs, NEIGHBOUR, "http")


def test_the_pod_resolves_names_with_dns_over_udp_and_tcp(restricted_docs: list[dict[str, Any]]) -> None:
    assert admits_egress(restricted_docs, KUBE_DNS, 53, "UDP")
    assert admits_egress(restricted_docs, KUBE_DNS, 53, "TCP")
    assert not admits_egress(restricted_docs, KUBE_DNS, 80)


def test_the_pod_reaches_the_otlp_collector_on_the_configured_port(restricted_docs: list[dict[str, Any]]) -> None:
    port = otlp_port(restricted_docs)
    assert port == 4318
    assert admits_egress(restricted_docs, OTEL_COLLECTOR, port)
    assert not admits_egress(restricted_docs, OTEL_COLLECTOR, 4317)
    assert not admits_egress(restricted_docs, NEIGHBOUR, port)  # only the collector's pods


@pytest.mark.parametrize(
    ("endpoint", "port"),
    [("http://collector.monitoring:4317/v1/traces", 4317), ("https://otlp.example.com/v1/traces", 443)],
)
def test_the_otlp_egress_port_follows_the_endpoint_url(deploy_tools: dict[str, Path], endpoint: str, port: int) -> None:
    docs = render(deploy_tools, "-f", PRODUCTION, "--set", f"config.tracing.otlp_endpoint={endpoint}")
    assert otlp_port(docs) == port
    assert admits_egress(docs, OTEL_COLLECTOR, port)


def test_without_an_otlp_endpoint_no_collector_egress_is_rendered(deploy_tools: dict[str, Path]) -> None:
    docs = render(deploy_tools, "-f", PRODUCTION, "--set", "config.tracing.otlp_endpoint=null")
    assert not admits_egress(docs, OTEL_COLLECTOR, 4318)


def test_the_pod_reaches_the_idp_over_https_for_the_jwks_and_introspection(
    restricted_docs: list[dict[str, Any]],
) -> None:
    """config.auth.jwks_url and introspection_url are https on 443, behind the proxy range 10.20.0.0/16."""
    auth = rendered_config(restricted_docs)["auth"]
    for url in (auth["jwks_url"], auth["introspection_url"]):
        assert urllib.parse.urlsplit(url).scheme == "https"
    assert admits_egress(restricted_docs, {"ip": "10.20.1.7"}, 443)
    assert not admits_egress(restricted_docs, {"ip": "10.20.1.7"}, 80)
    assert not admits_egress(restricted_docs, {"ip": "192.0.2.10"}, 443)


def test_the_replicas_reach_postgresql_in_its_subnet_only(
    postgres_docs: list[dict[str, Any]], production_docs: list[dict[str, Any]]
) -> None:
    assert admits_egress(postgres_docs, {"ip": "10.30.4.20"}, 5432)
    assert not admits_egress(postgres_docs, {"ip": "10.30.5.20"}, 5432)
    assert not admits_egress(production_docs, {"ip": "10.30.4.20"}, 5432)  # SQLite: no database egress


def test_without_egress_rules_the_policy_leaves_egress_open(deploy_tools: dict[str, Path]) -> None:
    docs = render(deploy_tools, "-f", PRODUCTION, "--set", "networkPolicy.egress=null")
    assert only(docs, "NetworkPolicy")["spec"]["policyTypes"] == ["Ingress"]
    assert admits_egress(docs, OTEL_COLLECTOR, 4318)


# --- NOTES.txt ----------------------------------------------------------------------------------


def notes(tools: dict[str, Path], *args: str | Path) -> str:
    result = helm(tools, "install", "aql", "--dry-run=client", "--namespace", NAMESPACE, *args)
    assert result.returncode == 0, result.stderr
    return result.stdout.split("NOTES:", 1)[1]


def test_notes_say_how_to_reach_the_service_and_fetch_a_token(deploy_tools: dict[str, Path]) -> None:
    text = notes(deploy_tools, "-f", PRODUCTION)
    assert "kubectl -n mcp port-forward svc/aql-aql-mcp" in text
    assert "https://aql-mcp.example.com/mcp" in text
    assert "https://idp.example.com/.well-known/openid-configuration" in text
    assert "grant_type=client_credentials" in text
    assert "WARNING" not in text


def test_notes_warn_when_no_token_source_is_configured(deploy_tools: dict[str, Path]) -> None:
    assert "WARNING: no token source" in notes(deploy_tools)


def test_notes_name_the_secret_holding_the_request_state_key(deploy_tools: dict[str, Path]) -> None:
    assert "Secret aql-aql-mcp-request-state.\n   The chart generated it" in notes(deploy_tools)
    production = notes(deploy_tools, "-f", PRODUCTION)
    assert "Secret aql-mcp-request-state." in production
    assert "generated" not in production
    assert "2026-07-28" not in notes(deploy_tools, "--set", "config.mcp.modern_era=false")


def test_a_plugins_own_settings_pass_through_the_chart_to_check_config(
    deploy_tools: dict[str, Path], tmp_path: Path
) -> None:
    """`config.plugins.<name>` lands in the config file as `plugins.<name>`, where the plugin's own
    model validates it (issue 15): a good value passes check-config, a bad one fails it by name."""
    idp = {
        "AQL_MCP_AUTH__JWKS_URL": "https://idp.example.com/jwks",
        "AQL_MCP_AUTH__ISSUER": "https://idp.example.com",
        "AQL_MCP_AUTH__AUDIENCE": "https://mcp.example.com/mcp",
        "PYTHONPATH": str(ROOT),  # tests.support.tuned, as if installed in the image
    }
    for level, code in ((3, 0), (9, 2)):
        values = {
            "config": {"server": {"plugins": ["tests.support.tuned:plugin"]}, "plugins": {"tuned": {"level": level}}}
        }
        docs = render(deploy_tools, "--values", values_file(tmp_path, values))
        assert rendered_config(docs)["plugins"] == {"tuned": {"level": level}}
        config = only(docs, "ConfigMap")["data"]["config.yaml"]
        result = check_config(config, {**pod_environment(docs), **idp}, tmp_path)
        assert result.returncode == code, result.stderr
        assert ("plugins.tuned.level" in result.stderr) is (code == 2)
        assert "Traceback" not in result.stderr
