"""Collect an MCP-AQL conformance evidence bundle from a running aql-mcp (docs/mcp-aql-conformance.md).

The MCP-AQL project's conformance runner judges *evidence bundles*: introspection answers, the
parameters each operation accepts, failures for missing and unknown parameters, create-read and
update round trips, a batch and constraint failures. This script asks a live server for each of
them over MCP (2026-07-28 requests, one per call) and writes the bundle; nothing in it is written by
hand, so a regression in the server shows up as a failing check of the runner.

    MCP_TOKEN=$(aql-mcp dev-token) python scripts/aql_evidence.py http://127.0.0.1:8000/mcp evidence.json

The token comes from `MCP_TOKEN`, never from the command line (it would show in `ps`). Start the
server with `AQL_MCP_AQL__MODE=all` so that both endpoint modes (CRUDE and single) are served.
Semantic evaluation needs an answer written by a model and is not collected.
"""

from __future__ import annotations

import argparse
import itertools
import os
import secrets
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import orjson

VERSION = "2026-07-28"
# A value of each parameter type, to get past one missing parameter and find the next.
RETRIES = 20
PLACEHOLDERS: dict[str, Any] = {"string": "evidence", "integer": 1, "number": 1, "boolean": False, "object": {}}


class Client:
    """One modern-era `tools/call` per operation, answered with the OperationResult envelope."""

    def __init__(self, url: str, token: str) -> None:
        self._http = httpx.Client(timeout=30)
        self._url = url
        self._token = token
        self._ids = itertools.count(1)

    def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        meta = {
            "io.modelcontextprotocol/protocolVersion": VERSION,
            "io.modelcontextprotocol/clientInfo": {"name": "aql-evidence", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        body = {
            "jsonrpc": "2.0",
            "id": next(self._ids),
            "method": "tools/call",
            "params": {"name": tool, "arguments": arguments, "_meta": meta},
        }
        headers = {
            "authorization": f"Bearer {self._token}",
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
            "mcp-protocol-version": VERSION,
            "mcp-method": "tools/call",
            "mcp-name": tool,
        }
        operation = arguments.get("operation")
        if isinstance(operation, str):
            # The endpoint tools mirror `operation` into this header (x-mcp-header); a batch has none.
            headers["mcp-param-operation"] = operation
        response = self._http.post(self._url, content=orjson.dumps(body), headers=headers)
        for _ in range(RETRIES):
            if response.status_code != 429:
                break
            # Over the server's rate limit (limits.rate_per_second): wait as long as it says.
            time.sleep(min(float(response.headers.get("retry-after", "1")), 5.0))
            response = self._http.post(self._url, content=orjson.dumps(body), headers=headers)
        answer = response.json()
        if "error" in answer:
            raise SystemExit(f"{tool}: JSON-RPC error {answer['error'].get('code')}: {answer['error'].get('message')}")
        envelope: dict[str, Any] = answer["result"]["structuredContent"]
        return envelope


class Collector:
    def __init__(self, client: Client) -> None:
        self.client = client
        self.details: dict[str, dict[str, Any]] = {}
        self.defaults: list[dict[str, Any]] = []

    def run(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        detail = self.details.get(operation)
        tool = detail["mcpTool"] if detail else "mcp_aql_read"
        return self.client.call(tool, {"operation": operation, "params": params})

    def bundle(self) -> dict[str, Any]:
        listing = self.run("introspect", {"query": "operations"})
        protocol = listing["data"]["_protocol"]
        names = [op["name"] for op in listing["data"]["operations"]]
        for name in names:
            self.details[name] = self.run("introspect", {"query": "operations", "name": name})["data"]["operation"]
        modes = {"all": ["crude", "single"], "semantic": ["crude"], "single": ["single"]}[protocol["mode"]]
        unknown = {name: self.unknown_parameter(name) for name in names}
        round_trip, preserved, constraint = self.records()
        return {
            "implementation": "aql-mcp",
            "version": self.version(),
            "spec_version": protocol["version"],
            "expected_level": 2,
            "expected_exit_code": 0,
            "endpoint_modes": modes,
            "capabilities": {
                "field_selection": protocol["capabilities"]["field_selection"],
                "batch_operations": protocol["capabilities"]["batch"],
            },
            "introspection": {
                "operations_list": listing,
                "types_list": self.run("introspect", {"query": "types"}),
                "operation_details": list(self.details.values()),
            },
            "accepted_parameters": {name: self.accepted(name, unknown[name]) for name in names},
            "parameter_tests": {
                "missing_required": [case for name in names for case in self.missing_required(name)],
                "unknown_parameter": [
                    {"operation": name, "parameter": "evidence_unknown", "response": unknown[name]} for name in names
                ],
                "optional_defaults": self.defaults,
            },
            "error_tests": [
                {"name": f"{name}-unknown-parameter", "must_mention": ["evidence_unknown"], "response": response}
                for name, response in unknown.items()
                if response.get("success") is False
            ],
            "round_trip_tests": [round_trip],
            "update_preservation_tests": [preserved],
            "batch_example": self.batch(),
            "constraint_tests": [constraint],
        }

    def version(self) -> str:
        envelope = self.run("introspect", {"query": "operations"})
        return str(envelope["data"]["_protocol"].get("adapter_version", "unreleased"))

    def unknown_parameter(self, name: str) -> dict[str, Any]:
        return self.run(name, {"evidence_unknown": True})

    def accepted(self, name: str, unknown: dict[str, Any]) -> list[str]:
        """What the router accepts, from its own refusal of an unknown parameter (its details, or
        the list its message ends with where the details are bare)."""
        error = unknown.get("error", {})
        if "valid_params" in error.get("details", {}):
            return list(error["details"]["valid_params"])
        _, _, listed = str(error.get("message", "")).partition("Valid parameters: ")
        return [part.strip() for part in listed.split(",") if part.strip()]

    def missing_required(self, name: str) -> list[dict[str, Any]]:
        """Leave out each required parameter in turn: the failure must name it. Parameters already
        reported are filled with a placeholder of their type to reach the next one."""
        detail = self.details[name]
        required = [p for p in detail["parameters"] if p.get("required")]
        example = (detail.get("examples") or [{}])[0].get("request", {}).get("params", {})
        cases = []
        for index, parameter in enumerate(required):
            params = {p["name"]: example.get(p["name"], _placeholder(p)) for p in required[:index]}
            cases.append({"operation": name, "parameter": parameter["name"], "response": self.run(name, params)})
        return cases

    def records(self) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        collection = "evidence_" + secrets.token_hex(4)
        self.run("create_collection", {"collection": collection})
        data = {"title": "Atlas", "metadata": {"priority": "high", "tags": ["a", "b"]}, "count": 3}
        created = self.run("create_record", {"collection": collection, "data": data})["data"]
        read = self.run("get_record", {"collection": collection, "id": created["id"]})
        round_trip = {
            "name": "record-create-read",
            "expected_fields": {f"data.{key}": value for key, value in data.items()},
            "read_response": read,
        }
        updated = self.run("update_record", {"collection": collection, "id": created["id"], "input": {"title": "B"}})
        after = self.run("get_record", {"collection": collection, "id": created["id"]})
        preserved = {
            "name": "record-update-keeps-other-fields",
            "preserved_fields": {"data.title": "B", "data.metadata": data["metadata"], "data.count": 3},
            "read_response": after,
        }
        stale = self.run(
            "update_record",
            {"collection": collection, "id": created["id"], "input": {"count": 4}, "if_match": created["_etag"]},
        )
        if updated.get("success") is not True:
            raise SystemExit(f"update_record failed: {updated.get('error')}")
        constraint = {"name": "stale-etag-is-refused", "documented": True, "response": stale}
        self.defaults = self.page_default(collection)
        self.run("delete_collection", {"collection": collection})
        return round_trip, preserved, constraint

    def page_default(self, collection: str) -> list[dict[str, Any]]:
        """`first` left out: a collection one record longer than the documented default answers a
        page of exactly the default (the path is read by the runner, where `items.length` is the count)."""
        parameters = {p["name"]: p for p in self.details["list_records"]["parameters"]}
        default = int(parameters["first"]["default"])
        for number in range(default):
            self.run("create_record", {"collection": collection, "data": {"number": number}})
        return [
            {
                "operation": "list_records",
                "parameter": "first",
                "expected_value_path": "data.items.length",
                "expected_value": default,
                "response": self.run("list_records", {"collection": collection}),
            }
        ]

    def batch(self) -> dict[str, Any]:
        return self.client.call(
            "mcp_aql_read",
            {"operations": [{"operation": "introspect", "params": {"query": "types"}}]},
        )


def _placeholder(parameter: dict[str, Any]) -> Any:
    kind = str(parameter.get("type", "string")).split("|")[0]
    if kind == "array":
        return []
    return PLACEHOLDERS.get(kind, "evidence")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("url", help="the server's MCP endpoint, e.g. http://127.0.0.1:8000/mcp")
    parser.add_argument("output", type=Path, help="where to write the evidence bundle (JSON)")
    args = parser.parse_args()
    token = os.environ.get("MCP_TOKEN")
    if not token:
        print("set MCP_TOKEN to a bearer token for the server (aql-mcp dev-token in development)", file=sys.stderr)
        return 2
    bundle = Collector(Client(args.url, token)).bundle()
    args.output.write_bytes(orjson.dumps(bundle, option=orjson.OPT_INDENT_2))
    print(f"wrote {args.output}: {len(bundle['introspection']['operation_details'])} operations")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
