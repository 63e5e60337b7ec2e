"""The official MCP conformance suite (@modelcontextprotocol/conformance) against a real server.

It is the judge of protocol behaviour: 0.1.16 `--suite all` for MCP 2025-11-25, and 0.2.0-alpha.12
for both eras (`--spec-version 2026-07-28` and `2025-11-25`). Every scenario must pass with a
development token, and without a token every request must be refused with 401 (corporate §7.1).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.support.replicas import proxy_settings, run_proxy, start_replicas
from tests.support.server import ServerProcess, free_port, start_server
from tests.support.versions import CONFORMANCE_ALPHA

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "conformance.sh"
SCENARIOS = 32
ALPHA = CONFORMANCE_ALPHA
MODERN_SCENARIOS = 40
ALPHA_LEGACY_SCENARIOS = 33
# The 0.2 suite sends hundreds of requests a second under one token (scripts/conformance.sh).
BOTH_ERAS = {
    "AQL_MCP_MCP__MODERN_ERA": "true",
    "AQL_MCP_LIMITS__RATE_PER_SECOND": "1000",
    "AQL_MCP_LIMITS__RATE_BURST": "2000",
}


def run_suite(url: str, token: str | None, *args: str, version: str | None = None) -> tuple[int, int, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("MCP_TOKEN", "CONFORMANCE_VERSION")}
    if token:
        env["MCP_TOKEN"] = token
    if version:
        env["CONFORMANCE_VERSION"] = version
    done = subprocess.run([str(SCRIPT), url, *args], env=env, capture_output=True, text=True, timeout=600)
    match = re.search(r"^conformance: (\d+) passed, (\d+) failed$", done.stdout, re.MULTILINE)
    assert match, f"no summary line:\n{done.stdout}\n{done.stderr}"
    return int(match.group(1)), int(match.group(2)), done.stdout


def test_every_conformance_scenario_passes_with_a_token(server: ServerProcess) -> None:
    passed, failed, output = run_suite(server.url, server.token(subject="conformance"))
    assert (passed, failed) == (SCENARIOS, 0), output


def test_every_conformance_scenario_passes_on_postgresql(database: str, tmp_path: Path) -> None:
    """issue 11: the PostgreSQL engine serves the whole protocol as SQLite does."""
    with start_server(tmp_path, env={"AQL_MCP_STORE__URL": database}) as server:
        passed, failed, output = run_suite(server.url, server.token(subject="conformance"))
    assert (passed, failed) == (SCENARIOS, 0), output


def test_every_conformance_scenario_passes_through_a_round_robin_proxy_over_three_replicas(
    database: str, tmp_path: Path
) -> None:
    """issue 11: each request of the suite goes to the next replica, as behind a gateway without
    session affinity; sessions, streams, resumption and server requests still work."""
    port = free_port()
    with (
        start_replicas(tmp_path, database, env=proxy_settings(port)) as replicas,
        run_proxy(replicas.ports, port) as base,
    ):
        passed, failed, output = run_suite(f"{base}/mcp", replicas.token("conformance"))
    assert (passed, failed) == (SCENARIOS, 0), output


def test_both_eras_pass_their_suites_against_one_process(tmp_path: Path) -> None:
    """issue 13: with the modern era on, one process passes 0.2.0-alpha.12 for MCP 2026-07-28 (all 40
    scenarios, authentication on), and still 0.1.16 `--suite all` and alpha.12 for 2025-11-25."""
    with start_server(tmp_path, env=BOTH_ERAS) as server:
        token = server.token(subject="conformance")
        modern = run_suite(server.url, token, "--spec-version", "2026-07-28", version=ALPHA)
        legacy = run_suite(server.url, token)
        legacy_alpha = run_suite(server.url, token, "--spec-version", "2025-11-25", version=ALPHA)
    assert modern[:2] == (MODERN_SCENARIOS, 0), modern[2]
    assert legacy[:2] == (SCENARIOS, 0), legacy[2]
    assert legacy_alpha[:2] == (ALPHA_LEGACY_SCENARIOS, 0), legacy_alpha[2]


def test_without_a_token_every_mcp_request_is_refused_with_401(server: ServerProcess) -> None:
    before = len(server.log_text().splitlines())
    passed, _, output = run_suite(server.url, None)
    assert passed == 0, output
    lines = [line for line in server.log_text().splitlines()[before:] if '"http_request"' in line and '"/mcp"' in line]
    assert lines, "the suite sent no request"
    statuses = {str(json.loads(line)["status"]) for line in lines}
    # The DNS-rebinding scenario's foreign Origin is refused (403) before authentication is reached.
    assert statuses <= {"401", "403"}, statuses
    assert "401" in statuses


@pytest.fixture(autouse=True)
def _needs_npm() -> None:
    if subprocess.run(["which", "npm"], capture_output=True).returncode != 0:
        pytest.fail("npm is required to install the conformance suite")


TASK_SCENARIOS = (
    "tasks-lifecycle",
    "tasks-capability-negotiation",
    "tasks-wire-fields",
    "tasks-request-state-removal",
    "tasks-mrtr-input",
    "tasks-request-headers",
    "tasks-dispatch-and-envelope",
    "tasks-status-notifications",
    "tasks-required-task-error",
    "tasks-mrtr-composition",
)


def test_the_tasks_extension_scenarios_pass(tmp_path: Path) -> None:
    """issue 13: the suite's io.modelcontextprotocol/tasks (SEP-2663) extension scenarios, which
    `--suite all` leaves out; each runs alone (`--scenario`, `--force` past the version filter) and
    no check may fail. `tasks-status-notifications` has no check the suite runs today."""
    failures: dict[str, list[str]] = {}
    checked = 0
    with start_server(tmp_path, env=BOTH_ERAS) as server:
        token = server.token(subject="conformance")
        for scenario in TASK_SCENARIOS:
            *_, output = run_suite(
                server.url, token, "--spec-version", "2026-07-28", "--scenario", scenario, "--force", version=ALPHA
            )
            match = re.search(r"^results: (.+)$", output, re.MULTILINE)
            assert match, output
            checks = [c for f in Path(match.group(1)).glob("*/checks.json") for c in json.loads(f.read_text())]
            checked += sum(c["status"] == "SUCCESS" for c in checks)
            failures[scenario] = [c["id"] for c in checks if c["status"] == "FAILURE"]
    assert all(not failed for failed in failures.values()), failures
    assert checked >= 40, checked
