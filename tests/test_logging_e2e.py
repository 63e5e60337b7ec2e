"""What a real `aql-mcp serve` writes to its log: the MCP-AQL error code on the `tool_call` line
(both eras, single and batch), the reason of a refused Origin, and probes at debug (corporate §15.2;
issue 15, "Logs")."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from aql_mcp.exceptions import OriginNotAllowed
from aql_mcp.middleware.origin import LOGGED_ORIGIN_CHARS
from tests.support.asgi import MCP_HEADERS, initialize_params, rpc
from tests.support.idp import running_idp
from tests.support.modern import MODERN, modern_body, modern_headers
from tests.support.server import ServerProcess, start_server
from tests.support.wait import until

META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientInfo": {"name": "logging-e2e", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
SECONDS = 20.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with start_server(tmp_path_factory.mktemp("logging")) as process:
        yield process


@pytest.fixture(scope="module")
def debug_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with start_server(tmp_path_factory.mktemp("debug"), env={"AQL_MCP_LOGGING__LEVEL": "debug"}) as process:
        yield process


def lines_of(server: ServerProcess, request_id: str) -> list[dict[str, Any]]:
    """The JSON log lines of one request, once its access line is written (the request's last)."""

    def parsed() -> list[dict[str, Any]]:
        found = []
        for line in server.log_text().splitlines():
            if line.startswith("{") and request_id in line:
                entry = json.loads(line)
                if entry.get("request_id") == request_id:
                    found.append(entry)
        return found

    until(lambda: any(e["event"] == "http_request" for e in parsed()), f"request {request_id} was never logged")
    return parsed()


def event(server: ServerProcess, request_id: str, name: str) -> dict[str, Any]:
    (line,) = [entry for entry in lines_of(server, request_id) if entry["event"] == name]
    return line


def new_id() -> str:
    return "log-" + secrets.token_hex(6)


def legacy_session(server: ServerProcess) -> dict[str, str]:
    headers = {**MCP_HEADERS, "authorization": f"Bearer {server.token()}"}
    response = httpx.post(server.url, json=rpc("initialize", initialize_params()), headers=headers, timeout=SECONDS)
    assert response.status_code == 200, response.text
    session = {**headers, "mcp-session-id": response.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
    initialized = httpx.post(server.url, json=rpc("notifications/initialized", None, None), headers=session)
    assert initialized.status_code == 202
    return session


def legacy_call(server: ServerProcess, tool: str, arguments: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    request_id = new_id()
    headers = {**legacy_session(server), "x-request-id": request_id}
    body = rpc("tools/call", {"name": tool, "arguments": arguments}, 7)
    response = httpx.post(server.url, json=body, headers=headers, timeout=SECONDS)
    assert response.status_code == 200, response.text
    return request_id, response.json()["result"]


def modern_call(server: ServerProcess, tool: str, arguments: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    request_id = new_id()
    headers = {**modern_headers(server.token(), "tools/call", tool, arguments=arguments), "x-request-id": request_id}
    body = modern_body("tools/call", {"name": tool, "arguments": arguments}, META, 8)
    response = httpx.post(server.url, json=body, headers=headers, timeout=SECONDS)
    assert response.status_code == 200, response.text
    return request_id, response.json()["result"]


CALLERS = {"2025-11-25": legacy_call, MODERN: modern_call}


# --- The MCP-AQL code on the tool_call line ------------------------------------------------------


@pytest.mark.parametrize("era", CALLERS)
def test_a_failed_operation_logs_its_mcp_aql_code_and_name_on_the_tool_call_line(
    server: ServerProcess, era: str
) -> None:
    request_id, result = CALLERS[era](server, "mcp_aql_create", {"operation": "create_record", "params": {}})

    assert result["isError"] is True
    code = result["structuredContent"]["error"]["code"]
    assert code == "VALIDATION_MISSING_PARAM"
    line = event(server, request_id, "tool_call")
    assert (line["level"], line["tool"], line["operation"]) == ("info", "mcp_aql_create", "create_record")
    assert (line["outcome"], line["code"], line["codes"]) == ("client_error", code, None)


@pytest.mark.parametrize("era", CALLERS)
def test_an_unknown_operation_logs_its_code_but_not_the_callers_name(server: ServerProcess, era: str) -> None:
    unknown = "no_such_operation_" + secrets.token_hex(4)
    request_id, result = CALLERS[era](server, "mcp_aql_read", {"operation": unknown, "params": {}})

    assert result["structuredContent"]["error"]["code"] == "NOT_FOUND_OPERATION"
    line = event(server, request_id, "tool_call")
    assert (line["operation"], line["code"]) == (None, "NOT_FOUND_OPERATION")
    assert unknown not in server.log_text()


@pytest.mark.parametrize("era", CALLERS)
def test_a_successful_operation_logs_no_code(server: ServerProcess, era: str) -> None:
    request_id, result = CALLERS[era](server, "mcp_aql_read", {"operation": "list_collections", "params": {}})

    assert result["structuredContent"]["success"] is True
    line = event(server, request_id, "tool_call")
    assert (line["operation"], line["outcome"], line["code"], line["codes"]) == ("list_collections", "ok", None, None)


@pytest.mark.parametrize("era", CALLERS)
def test_a_batch_logs_the_distinct_codes_of_its_failed_items(server: ServerProcess, era: str) -> None:
    collection = "logged_" + secrets.token_hex(4)
    operations = [
        {"operation": "create_collection", "params": {"collection": collection}},
        {"operation": "create_record", "params": {}},
        {"operation": "create_record", "params": {"collection": collection}},
        {"operation": "get_record", "params": {"collection": collection, "id": "rec_missing"}},
        {"operation": "delete_collection", "params": {"collection": collection}},
    ]
    request_id, result = CALLERS[era](server, "mcp_aql_create", {"operations": operations})

    items = result["structuredContent"]["results"]
    failed = [item["result"]["error"]["code"] for item in items if not item["result"]["success"]]
    assert failed
    line = event(server, request_id, "tool_call")
    assert (line["operation"], line["code"]) == ("batch", None)
    assert line["codes"] == list(dict.fromkeys(failed))


def test_a_batch_refused_whole_logs_its_code(server: ServerProcess) -> None:
    request_id, result = legacy_call(server, "mcp_aql_create", {"operations": []})

    code = result["structuredContent"]["error"]["code"]
    assert event(server, request_id, "tool_call")["code"] == code


def test_a_code_many_items_failed_with_is_named_once(server: ServerProcess) -> None:
    operations = [{"operation": "create_record", "params": {}}] * 30
    request_id, _ = legacy_call(server, "mcp_aql_create", {"operations": operations})

    assert event(server, request_id, "tool_call")["codes"] == ["VALIDATION_MISSING_PARAM"]


# --- A refused Origin says why --------------------------------------------------------------------


REFUSED = {
    "not_allowed": ("https://elsewhere.example", "https://elsewhere.example:443"),
    "null": ("null", None),
    "malformed": ("https://user:pass@elsewhere.example/path?x=1", None),
}


@pytest.mark.parametrize("reason", REFUSED)
def test_a_refused_origin_is_403_and_logs_its_reason(server: ServerProcess, reason: str) -> None:
    """2025-11-25 transports, Security Warning 1: 403 for an invalid Origin; the log says which rule."""
    origin, shown = REFUSED[reason]
    request_id = new_id()
    headers = {**MCP_HEADERS, "origin": origin, "x-request-id": request_id, "authorization": f"Bearer {server.token()}"}

    response = httpx.post(server.url, json=rpc("ping"), headers=headers, timeout=SECONDS)

    assert response.status_code == 403
    body = response.json()
    assert body["error"]["code"] == OriginNotAllowed.code
    assert body["error"]["data"]["requestId"] == request_id
    assert "access-control-allow-origin" not in response.headers
    line = event(server, request_id, "origin_refused")
    assert (line["level"], line["reason"], line["origin"]) == ("info", reason, shown)
    log = server.log_text()
    assert "pass@" not in log
    assert headers["authorization"].split()[1] not in log


def test_every_origin_is_refused_without_an_allow_list_and_the_log_says_so(tmp_path: Path) -> None:
    """Production mode with no `http.allowed_origins`: a browser origin has nothing to match."""
    with start_server(tmp_path, dev=False, env=production_env()) as production:
        request_id = new_id()
        headers = {"origin": "http://127.0.0.1:3000", "x-request-id": request_id}
        response = httpx.get(f"{production.base}/health", headers=headers, timeout=SECONDS)

        assert response.status_code == 403
        line = event(production, request_id, "origin_refused")
    assert (line["reason"], line["origin"]) == ("no_allow_list", "http://127.0.0.1:3000")


def test_a_long_refused_origin_is_cut_short_in_the_log(server: ServerProcess) -> None:
    request_id = new_id()
    origin = "https://" + "a" * 60 + "." + "b" * 60 + "." + "c" * 60 + "." + "d" * 60 + ".example"
    response = httpx.get(f"{server.base}/health", headers={"origin": origin, "x-request-id": request_id})

    assert response.status_code == 403
    assert len(event(server, request_id, "origin_refused")["origin"]) <= LOGGED_ORIGIN_CHARS


# --- Probes at debug ------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/health", "/ready", "/metrics"])
def test_a_probe_is_not_in_the_info_log(server: ServerProcess, path: str) -> None:
    request_id = new_id()
    assert httpx.get(f"{server.base}{path}", headers={"x-request-id": request_id}).status_code == 200
    # The request after it is logged at info: once it is in the log, the probe's line would be too.
    marker = new_id()
    httpx.get(f"{server.base}/", headers={"x-request-id": marker})
    assert event(server, marker, "http_request")["level"] == "info"

    assert request_id not in server.log_text()


@pytest.mark.parametrize("path", ["/health", "/ready", "/metrics"])
def test_a_probe_is_logged_at_debug(debug_server: ServerProcess, path: str) -> None:
    request_id = new_id()
    assert httpx.get(f"{debug_server.base}{path}", headers={"x-request-id": request_id}).status_code == 200

    line = event(debug_server, request_id, "http_request")
    assert (line["level"], line["path"], line["status"]) == ("debug", path, 200)


def test_other_requests_stay_at_info(server: ServerProcess) -> None:
    request_id = new_id()
    response = httpx.post(server.url, json=rpc("ping"), headers={**MCP_HEADERS, "x-request-id": request_id})

    assert response.status_code == 401
    line = event(server, request_id, "http_request")
    assert (line["level"], line["path"], line["status"]) == ("info", "/mcp", 401)


def production_env() -> dict[str, str]:
    """Production mode on a static HS256-less configuration: opaque tokens only, no IdP needed."""
    digest = "0" * 64
    return {
        "AQL_MCP_AUTH__ISSUER": "https://idp.example",
        "AQL_MCP_AUTH__AUDIENCE": "https://aql-mcp.example/mcp",
        "AQL_MCP_AUTH__OPAQUE_TOKENS": json.dumps({digest: {"sub": "robot", "scopes": ["mcp"]}}),
    }


# --- A JWKS failure says what failed --------------------------------------------------------------


def test_a_failing_jwks_is_logged_with_the_status_and_host_but_no_query_string(tmp_path: Path) -> None:
    """A real server in production mode whose IdP answers 503: the warning says so and names the host."""
    secret = "q-" + secrets.token_hex(8)
    with running_idp() as idp:
        idp.answer_status = 503
        env = {
            "AQL_MCP_AUTH__JWKS_URL": f"{idp.jwks_url}?tenant={secret}",
            "AQL_MCP_AUTH__ISSUER": idp.issuer,
            "AQL_MCP_AUTH__AUDIENCE": idp.audience,
            "AQL_MCP_AUTH__ALLOW_INSECURE_HTTP": "true",
        }
        with start_server(tmp_path, dev=False, env=env) as production:
            until(lambda: '"jwks_refresh_failed"' in production.log_text(), "the failed fetch was never logged")
            assert httpx.get(f"{production.base}/ready").status_code == 503
            log = production.log_text()
    line = next(json.loads(text) for text in log.splitlines() if '"jwks_refresh_failed"' in text)
    assert (line["level"], line["reason"], line["status"]) == ("warning", "http_status", 503)
    assert line["host"] == idp.jwks_url.split("/")[2]
    assert line["last_good_seconds_ago"] is None
    assert secret not in log


def test_a_failing_probe_stays_at_info_where_it_explains_a_pod_out_of_service(tmp_path: Path) -> None:
    """/ready answers 503 while the IdP fails (no key set yet): that line is not demoted to debug."""
    with running_idp() as idp:
        idp.answer_status = 503
        env = {
            "AQL_MCP_AUTH__JWKS_URL": idp.jwks_url,
            "AQL_MCP_AUTH__ISSUER": idp.issuer,
            "AQL_MCP_AUTH__AUDIENCE": idp.audience,
            "AQL_MCP_AUTH__ALLOW_INSECURE_HTTP": "true",
        }
        with start_server(tmp_path, dev=False, env=env) as production:
            request_id = new_id()
            response = httpx.get(f"{production.base}/ready", headers={"x-request-id": request_id})
            assert response.status_code == 503
            line = event(production, request_id, "http_request")
    assert (line["level"], line["path"], line["status"]) == ("info", "/ready", 503)
