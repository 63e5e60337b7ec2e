"""scripts/aql_evidence.py: the MCP-AQL conformance evidence of a live server holds what the MCP-AQL
conformance runner checks at Level 1 and 2 (docs/mcp-aql-conformance.md). The runner itself is not
part of this repository; these tests check the same properties of the same bundle, so a server change
that would fail it fails here first."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from scripts.aql_evidence import Client, Collector

from tests.support.server import start_server

# The collector makes a few hundred calls in a second or two: more than the default rate limit allows.
GENEROUS = {"AQL_MCP_LIMITS__RATE_PER_SECOND": "1000", "AQL_MCP_LIMITS__RATE_BURST": "2000"}


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    state: Path = tmp_path_factory.mktemp("evidence")
    with start_server(state, env={"AQL_MCP_AQL__MODE": "all", **GENEROUS}, plugins=()) as server:
        yield Collector(Client(server.url, server.token())).bundle()


def path(value: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        value = len(value) if part == "length" and isinstance(value, list) else value[part]
    return value


def test_every_operation_accepts_exactly_the_parameters_introspection_documents(bundle: dict[str, Any]) -> None:
    """MCP-AQL §7 introspection fidelity: what the router accepts is what introspection says."""
    details = bundle["introspection"]["operation_details"]
    assert {d["name"] for d in details} >= {"introspect", "create_record", "list_records"}
    for detail in details:
        documented = [p["name"] for p in detail["parameters"]]
        assert bundle["accepted_parameters"][detail["name"]] == documented, detail["name"]


def test_each_missing_required_parameter_fails_and_names_it(bundle: dict[str, Any]) -> None:
    cases = bundle["parameter_tests"]["missing_required"]
    required = {(d["name"], p["name"]) for d in bundle["introspection"]["operation_details"] for p in d["parameters"]}
    required = {pair for pair in required if _required(bundle, *pair)}
    assert {(c["operation"], c["parameter"]) for c in cases} == required
    for case in cases:
        assert case["response"]["success"] is False
        assert case["response"]["error"]["code"] == "VALIDATION_MISSING_PARAM", case
        assert case["parameter"] in case["response"]["error"]["message"]


def test_an_unknown_parameter_fails_naming_it_without_internals(bundle: dict[str, Any]) -> None:
    for case in bundle["parameter_tests"]["unknown_parameter"]:
        error = case["response"]["error"]
        assert error["code"] == "VALIDATION_UNKNOWN_PARAM"
        assert case["parameter"] in error["message"]
        assert "Traceback" not in error["message"]
        assert "/src/" not in error["message"]


def test_round_trips_keep_what_was_written_and_the_page_default_is_observable(bundle: dict[str, Any]) -> None:
    for case in bundle["round_trip_tests"]:
        for dotted, expected in case["expected_fields"].items():
            assert path(case["read_response"], dotted) == expected
    for case in bundle["update_preservation_tests"]:
        for dotted, expected in case["preserved_fields"].items():
            assert path(case["read_response"], dotted) == expected
    for case in bundle["parameter_tests"]["optional_defaults"]:
        assert path(case["response"], case["expected_value_path"]) == case["expected_value"]
    assert all(case["response"]["success"] is False for case in bundle["constraint_tests"])


def test_level_two_features_are_advertised_with_evidence(bundle: dict[str, Any]) -> None:
    assert bundle["endpoint_modes"] == ["crude", "single"]
    assert bundle["capabilities"] == {"field_selection": True, "batch_operations": True}
    batch = bundle["batch_example"]
    assert batch["success"] is True
    assert [item["result"]["success"] for item in batch["results"]] == [True]


# The operations of the built-in plugins (records, executions, safety): the bundle holds each.
BUILTIN_OPERATIONS = {
    "introspect",
    "create_collection",
    "list_collections",
    "delete_collection",
    "create_index",
    "list_indexes",
    "drop_index",
    "create_record",
    "get_record",
    "list_records",
    "search_records",
    "update_record",
    "delete_record",
    "get_usage",
    "execute_import",
    "execute_export",
    "get_execution",
    "list_executions",
    "cancel_execution",
    "retry_execution",
    "execute_agent",
    "record_execution_step",
    "complete_execution",
    "abort_execution",
    "confirm_operation",
    "verify_challenge",
}
# The MCP-AQL runner's leak patterns (scripts/run-conformance-tests.mjs, FORBIDDEN_ERROR_PATTERNS,
# at MCPAQL/spec 7b1bba5). Its `/at\s+\S+/i` also matches plain English ("at most"): that one
# false hit may stay (docs/mcp-aql-conformance.md), a stack frame may not.
LEAKS = [
    re.compile(p, re.IGNORECASE) for p in (r"typeerror", r"referenceerror", r"syntaxerror", r"/src/", r"/node_modules/")
]
LEAKS += [re.compile(r"\.ts:\d+"), re.compile(r"\.js:\d+")]
FRAME = re.compile(r"at\s+\S+", re.IGNORECASE)
PLAIN_ENGLISH = re.compile(r"\b(at most|at least)\b", re.IGNORECASE)


def test_the_bundle_covers_every_operation_of_the_builtin_plugins(bundle: dict[str, Any]) -> None:
    """Issue 22: every operation (26 with the index operations), the executions and safety ones
    included, each introspected, its accepted parameters observed and an unknown parameter refused."""
    details = {d["name"] for d in bundle["introspection"]["operation_details"]}
    assert details == BUILTIN_OPERATIONS
    assert set(bundle["accepted_parameters"]) == BUILTIN_OPERATIONS
    assert {case["operation"] for case in bundle["parameter_tests"]["unknown_parameter"]} == BUILTIN_OPERATIONS
    assert {case["name"].removesuffix("-unknown-parameter") for case in bundle["error_tests"]} == BUILTIN_OPERATIONS


def test_error_messages_pass_the_runners_leak_patterns(bundle: dict[str, Any]) -> None:
    for case in bundle["error_tests"]:
        message = case["response"]["error"]["message"]
        assert not any(leak.search(message) for leak in LEAKS), message
        assert not FRAME.search(PLAIN_ENGLISH.sub("", message)), message


def _required(bundle: dict[str, Any], operation: str, parameter: str) -> bool:
    detail = next(d for d in bundle["introspection"]["operation_details"] if d["name"] == operation)
    return bool(next(p for p in detail["parameters"] if p["name"] == parameter).get("required"))


# MCP-AQL §8.6.3 and §8.7.4 name these parameters of the reserved safety-loop operations in camelCase;
# §4.3 (MUST snake_case) wins, and the tables' names are the deprecated aliases ADR-003 allows (issue 22).
SPEC_GIVEN = {"nextActionHint", "stepDescription", "maxAutonomousSteps", "riskTolerance", "requiresApproval"}


def test_parameter_names_are_snake_case_and_the_safety_loops_spec_given_names_are_deprecated_aliases(
    bundle: dict[str, Any],
) -> None:
    infos = [p for d in bundle["introspection"]["operation_details"] for p in d["parameters"]]
    assert {p["name"] for p in infos if not re.fullmatch(r"[a-z][a-z0-9_]*", p["name"])} == set()
    described = " ".join(p.get("description", "") for p in infos)
    assert {name for name in SPEC_GIVEN if f"Deprecated alias: '{name}'" in described} == SPEC_GIVEN
