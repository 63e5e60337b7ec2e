"""`aql_mcp.testing.client`: the in-process client plugin authors test with, over the real app."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import structlog.testing

from aql_mcp.exceptions import ConfigError
from aql_mcp.observability.logging import configure_logging
from aql_mcp.testing.client import Era, McpError, logging_at, plugin_client
from tests.support.distribution import fake_distribution
from tests.support.greeter import Greeter
from tests.support.tuned import Tuned

TUNED = "tests.support.tuned:plugin"

ERAS: list[Era] = ["legacy", "modern"]


@pytest.mark.anyio
@pytest.mark.parametrize("era", ERAS)
async def test_an_operation_runs_through_its_endpoint_tool_and_answers_the_envelope(era: Era) -> None:
    async with plugin_client(Greeter(), era=era) as client:
        envelope = await client.operation("greet", {"name": "Ada"})
    assert envelope == {"success": True, "data": {"greeting": "Hello, Ada!", "asked_by": "tester"}}


@pytest.mark.anyio
@pytest.mark.parametrize("era", ERAS)
async def test_operation_errors_surface_as_their_mcp_aql_codes(era: Era) -> None:
    async with plugin_client(Greeter(), era=era) as client:
        unknown = await client.operation("greet_everyone")
        invalid = await client.operation("greet", {"name": 7})
        mismatch = await client.operation("greet", {"name": "Ada"}, tool="mcp_aql_delete")
    assert unknown["error"]["code"] == "NOT_FOUND_OPERATION"
    assert invalid["error"]["code"] == "VALIDATION_INVALID_TYPE"
    assert mismatch["error"]["code"] == "VALIDATION_ENDPOINT_MISMATCH"


@pytest.mark.anyio
async def test_a_gated_operation_runs_once_confirmed_and_the_handlers_error_comes_back() -> None:
    async with plugin_client(Greeter()) as client:
        held = await client.operation("forget_greeting", {"name": "Ada"})
        token = held["error"]["details"]["confirmation_token"]
        answered = await client.operation("forget_greeting", {"name": "Ada", "confirmation_token": token})
    assert held["error"]["code"] == "CONFIRMATION_REQUIRED"
    assert answered["error"]["code"] == "NOT_FOUND_RESOURCE"


@pytest.mark.anyio
@pytest.mark.parametrize("era", ERAS)
async def test_tools_prompts_and_resources_are_reachable(era: Era) -> None:
    async with plugin_client(Greeter(), era=era) as client:
        tools = {tool["name"] for tool in await client.list_tools()}
        shouted = await client.call_tool("shout", {"words": "hey"})
        refused = await client.call_tool("shout", {"words": 1})
        prompt = await client.get_prompt("welcome", {"name": "Bo"})
        [contents] = await client.read_resource("greeter://about")
    assert {"shout", "mcp_aql_read", "mcp_aql_delete"} <= tools
    assert shouted["structuredContent"]["text"] == "HEY"
    assert refused["isError"] is True
    assert prompt["messages"][0]["content"]["text"] == "Welcome Bo to the greeter."
    assert contents["text"] == "The greeter greets."


@pytest.mark.anyio
@pytest.mark.parametrize("era", ERAS)
async def test_a_json_rpc_error_is_raised_with_its_code(era: Era) -> None:
    async with plugin_client(Greeter(), era=era) as client:
        with pytest.raises(McpError) as raised:
            await client.call_tool("no_such_tool")
    assert raised.value.code == -32602


@pytest.mark.anyio
async def test_plugins_load_from_import_strings_with_settings_overrides_and_batches() -> None:
    overrides = {"aql": {"mode": "single"}}
    async with plugin_client("tests.support.greeter:plugin", settings=overrides) as client:
        assert [tool["name"] for tool in await client.list_tools() if tool["name"].startswith("mcp_aql")] == ["mcp_aql"]
        batch = await client.batch(
            [{"operation": "greet", "params": {"name": "A"}}, {"operation": "greet", "params": {"name": "B"}}]
        )
    assert batch["summary"] == {"total": 2, "succeeded": 2, "failed": 0}


@pytest.mark.anyio
async def test_another_caller_has_its_own_identity(tmp_path: Path) -> None:
    async with plugin_client(Greeter(), state_dir=tmp_path) as client:
        bob = await client.as_user("bob")
        envelope = await bob.operation("greet", {"name": "Ada"})
        assert client.settings.store.path == tmp_path
    assert envelope["data"]["asked_by"] == "bob"


@pytest.mark.anyio
async def test_something_that_is_not_a_plugin_fails_at_startup() -> None:
    with pytest.raises(ConfigError):
        async with plugin_client(object()):  # type: ignore[arg-type]
            pass


@pytest.fixture
def tuned_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The author's own package installed, offering the plugin under test through its entry point."""
    monkeypatch.syspath_prepend(str(fake_distribution(tmp_path / "site", "tuned-plugin", {"tuned": TUNED})))


@pytest.mark.anyio
@pytest.mark.usefixtures("tuned_installed")
async def test_the_authors_installed_package_does_not_load_a_second_time() -> None:
    async with plugin_client(Tuned(), settings={"plugins": {"tuned": {"level": 2}}}) as client:
        answered = await client.call_tool("tuned_level", {})
    assert answered.get("isError", False) is False
    assert answered["content"][0]["text"] == "2"


@pytest.mark.anyio
@pytest.mark.usefixtures("tuned_installed")
async def test_installed_plugins_load_only_when_asked_for() -> None:
    async with plugin_client(Greeter(), entry_point_plugins=True) as client:
        tools = {tool["name"] for tool in await client.list_tools()}
    assert "tuned_level" in tools


@pytest.mark.anyio
@pytest.mark.parametrize(("level", "info_lines"), [("warning", False), ("info", True)])
async def test_the_service_logs_at_the_level_of_the_clients_settings(level: str, info_lines: bool) -> None:
    """`logging.level` (warning by default) applies in process as it does under `aql-mcp serve`."""
    async with plugin_client(Greeter(), settings={"logging": {"level": level}}) as client:
        with structlog.testing.capture_logs() as lines:
            await client.operation("greet", {"name": "Ada"})
            # A logger bound now: one cached by an earlier test of this process keeps its old filter.
            structlog.get_logger("aql_mcp.probe").info("probe_line")
            structlog.get_logger("aql_mcp.probe").warning("probe_warning")
    events = {line["event"] for line in lines}
    assert ("probe_line" in events) is info_lines
    assert "probe_warning" in events


@pytest.mark.anyio
async def test_the_client_talks_to_the_port_of_the_final_settings() -> None:
    async with plugin_client(Greeter(), settings={"server": {"port": 9123}}) as client:
        envelope = await client.operation("greet", {"name": "Ada"})
        assert client.http.base_url.port == 9123
    assert envelope["success"] is True


def test_a_logger_first_used_inside_the_clients_level_keeps_no_filter_after_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The client's level applies while it runs and no longer: a logger cached inside it kept its
    filter for the rest of the process, and a later test on the same pytest-xdist worker lost the
    service's info lines (its telemetry tests)."""
    configure_logging(level="info", console=False)
    logger = structlog.get_logger("aql_mcp.window_probe")
    with logging_at("warning"):
        logger.info("inside")
    logger.info("after")
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert [line["event"] for line in lines] == ["after"]
