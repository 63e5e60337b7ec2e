"""The official TypeScript client (`@modelcontextprotocol/client` 2.4.0) drives a real server.

A second client written by others judges the modern era (MCP 2026-07-28): pinned to that version it
must list and call tools, list and read resources, list and get prompts, and answer an MCP-AQL
confirmation that the server asks through MRTR (2026-07-28 basic/patterns/mrtr: `input_required`
with an `elicitation/create` input request, the client retrying with `inputResponses` and
`requestState`). The SDK clients fall back to `initialize` quietly when `server/discover` fails,
so the era is asserted from what the client says and from the wire, never from success alone.

tests/ts_client_smoke.mjs is the client side; Node and the package are installed once into
.tools/ by scripts/node.sh. A machine that cannot install them fails these tests: nothing skips.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.server import ServerProcess, start_server
from tests.support.typescript import TypeScriptClient, install_ts_client
from tests.support.versions import TS_CLIENT_PACKAGE, TS_CLIENT_VERSION

SMOKE = Path(__file__).with_name("ts_client_smoke.mjs")
PACKAGE, VERSION = TS_CLIENT_PACKAGE, TS_CLIENT_VERSION
MODERN, LEGACY = "2026-07-28", "2025-11-25"
RUN_SECONDS = 60
ELICIT = {"AQL_MCP_MCP__MODERN_ERA": "true", "AQL_MCP_AQL__CONFIRM_WITH_ELICITATION": "true"}


@pytest.fixture(scope="session")
def ts_client() -> TypeScriptClient:
    return install_ts_client()


@pytest.fixture(scope="module")
def modern_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with start_server(tmp_path_factory.mktemp("ts-client"), env=ELICIT) as process:
        yield process


def run_smoke(client: TypeScriptClient, server: ServerProcess, mode: str, confirm: str) -> dict[str, Any]:
    env = {
        **os.environ,
        "TS_CLIENT_PACKAGE": client.package,
        "MCP_URL": server.url,
        "MCP_TOKEN": server.token(subject=f"ts-{confirm}"),
        "MCP_MODE": mode,
        "MCP_CONFIRM": confirm,
    }
    done = subprocess.run([client.node, str(SMOKE)], env=env, capture_output=True, text=True, timeout=RUN_SECONDS)
    assert done.returncode == 0, f"the client failed:\n{done.stderr}"
    summary: dict[str, Any] = json.loads(done.stdout)
    return summary


Smoke = Callable[..., dict[str, Any]]


@pytest.fixture(scope="module")
def smoke(ts_client: TypeScriptClient, modern_server: ServerProcess) -> Smoke:
    """Runs the client once per (mode, answer) and keeps its summary for the module's tests."""
    runs: dict[tuple[str, str], dict[str, Any]] = {}

    def run(mode: str = MODERN, confirm: str = "accept") -> dict[str, Any]:
        if (mode, confirm) not in runs:
            runs[mode, confirm] = run_smoke(ts_client, modern_server, mode, confirm)
        return runs[mode, confirm]

    return run


@pytest.mark.parametrize("mode", [MODERN, "auto"])
def test_the_typescript_client_ends_up_modern_and_uses_tools_resources_and_prompts(smoke: Smoke, mode: str) -> None:
    """MCP 2026-07-28 server/discover, then requests without a session; "auto" must choose modern too."""
    summary = smoke(mode)

    assert summary["sdkVersion"] == VERSION
    assert (summary["era"], summary["protocolVersion"]) == ("modern", MODERN)
    assert summary["server"] == "aql-mcp"
    assert {"mcp_aql_read", "mcp_aql_delete", "test_simple_text"} <= set(summary["tools"])
    assert summary["toolCall"] == {"isError": False, "text": "This is a simple text response for testing."}
    assert "test://static-text" in summary["resources"]
    [content] = summary["resourceRead"]
    assert content["uri"] == "test://static-text"
    assert content["text"]
    assert "test_prompt_with_arguments" in summary["prompts"]
    assert summary["prompt"] == [{"role": "user", "text": "Prompt with arguments: arg1='one', arg2='two'"}]
    assert summary["created"]["envelope"]["success"] is True
    wire = summary["wire"]
    assert wire["posts"][0] == "server/discover"
    assert "initialize" not in wire["posts"]
    assert wire["sessionIds"] == []
    assert set(wire["statuses"]) == {"POST 200"}, "no GET stream, no DELETE, nothing refused"


def test_the_user_confirms_a_dangerous_operation_through_mrtr(smoke: Smoke) -> None:
    """MCP 2026-07-28 basic/patterns/mrtr: the server asks with `input_required`, the client's
    elicitation handler answers, the client retries the same `tools/call` and the operation runs."""
    summary = smoke(MODERN, "accept")

    assert summary["deleted"] == {
        "isError": False,
        "envelope": {"success": True, "data": {"name": summary["collection"], "deleted": True, "deleted_records": 0}},
    }
    [question] = summary["asked"]
    assert "delete_collection" in question["message"]
    assert question["schema"]["properties"]["confirm"]["type"] == "boolean"
    [retry] = summary["wire"]["retries"]
    assert retry["method"] == "tools/call"
    assert len(retry["inputResponseKeys"]) == 1
    assert retry["requestState"] is True
    assert summary["collection"] not in summary["collections"]
    assert summary["wire"]["sessionIds"] == []


@pytest.mark.parametrize("confirm", ["refuse", "decline", "cancel"])
def test_a_user_who_does_not_confirm_leaves_the_collection_in_place(smoke: Smoke, confirm: str) -> None:
    summary = smoke(MODERN, confirm)

    assert summary["deleted"]["isError"] is True
    error = summary["deleted"]["envelope"]["error"]
    assert error["code"] == "PERMISSION_DENIED"
    assert "confirmation_token" not in json.dumps(summary["deleted"])
    assert len(summary["asked"]) == 1
    assert summary["collection"] in summary["collections"]


def test_the_typescript_client_in_its_default_legacy_mode_is_served_on_the_same_process(smoke: Smoke) -> None:
    """Both eras on one `/mcp`: the client's default is the 2025-11-25 handshake, with a session,
    and the confirmation comes as a server-to-client `elicitation/create` on the request's stream."""
    summary = smoke("legacy", "accept")

    assert (summary["era"], summary["protocolVersion"]) == ("legacy", LEGACY)
    assert summary["wire"]["posts"][:2] == ["initialize", "notifications/initialized"]
    assert summary["wire"]["sessionIds"]
    assert summary["toolCall"]["isError"] is False
    assert summary["prompt"] == [{"role": "user", "text": "Prompt with arguments: arg1='one', arg2='two'"}]
    assert summary["deleted"]["envelope"]["data"]["deleted"] is True
    assert len(summary["asked"]) == 1
    assert summary["wire"]["retries"] == []
    assert summary["collection"] not in summary["collections"]


def test_with_the_modern_era_off_the_client_in_auto_mode_falls_back_to_initialize(
    ts_client: TypeScriptClient, tmp_path: Path
) -> None:
    """With `mcp.modern_era` off, the answer to `server/discover` (400, -32600) is one a dual-era
    client reads as "legacy server": it falls back and the smoke run completes in 2025-11-25."""
    with start_server(tmp_path, env={"AQL_MCP_MCP__MODERN_ERA": "false"}) as server:
        summary = run_smoke(ts_client, server, "auto", "accept")

    assert (summary["era"], summary["protocolVersion"]) == ("legacy", LEGACY)
    assert summary["wire"]["posts"][:2] == ["server/discover", "initialize"]
    assert summary["wire"]["statuses"][0] == "POST 400"
    assert summary["toolCall"]["isError"] is False
    assert summary["resourceRead"][0]["text"]
    assert summary["prompt"]
    # Without `aql.confirm_with_elicitation` the agent gets a confirmation token instead.
    assert summary["deleted"]["envelope"]["error"]["code"] == "CONFIRMATION_REQUIRED"
    assert summary["asked"] == []
