"""Parameter names are snake_case (MCP-AQL §4.3); other spellings are declared, deprecated aliases that
still work with a warning (MCP-AQL ADR-003), and a plugin that publishes another name fails at startup
(issue 22, item 1; docs/aql.md "Parameter names")."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic import Field

from aql_mcp.exceptions import ConfigError
from aql_mcp.operations.models import Call, Operation, Params
from aql_mcp.operations.service import PluginOperations
from aql_mcp.plugin_host.loader import load_plugins
from aql_mcp.protocol.primitives import Registry
from aql_mcp.store.sqlite.store import SqliteStore
from tests.operations.client import RECORDS, aql_session, records_settings
from tests.operations.envelope import check_result

pytestmark = pytest.mark.anyio
HERE = __name__


class Paged(Params):
    parameter_aliases: ClassVar[Mapping[str, str]] = {"pageSize": "page_size", "sortOrder": "sort_order"}

    page_size: int = Field(default=10, ge=1, description="Items per page.")
    sort_order: str = Field(default="asc", description="asc or desc.")


class CamelCase(Params):
    pageSize: int = 10


class PydanticAlias(Params):
    page_size: int = Field(default=10, alias="pageSize")


class StrayAlias(Params):
    parameter_aliases: ClassVar[Mapping[str, str]] = {"pageSize": "per_page"}

    page_size: int = 10


async def _echo(params: Params, call: Call) -> dict[str, Any]:
    return params.model_dump()


class _OnePlugin:
    """A plugin of one READ operation whose parameters are the model given."""

    trust = "certified"

    def __init__(self, name: str, params: type[Params]) -> None:
        self.name = name
        self.params = params

    def register_operations(self, operations: PluginOperations) -> None:
        operations.add(Operation("get_page", "READ", "Echo the parameters.", _echo, self.params))


paged = _OnePlugin("paged", Paged)
camel = _OnePlugin("camel", CamelCase)
pydantic_alias = _OnePlugin("aliased", PydanticAlias)
stray = _OnePlugin("stray", StrayAlias)


@pytest.mark.parametrize(
    ("plugin", "parameter"), [("camel", "pageSize"), ("pydantic_alias", "pageSize"), ("stray", "pageSize")]
)
def test_a_plugin_publishing_a_name_that_is_not_snake_case_fails_at_startup_naming_it(
    tmp_path: Path, plugin: str, parameter: str
) -> None:
    name = globals()[plugin].name
    with pytest.raises(ConfigError, match=rf"plugin {name}: operation 'get_page' .*'{parameter}'"):
        load_plugins([f"{HERE}:{plugin}"], Registry(), None, SqliteStore(tmp_path / "s"))


def test_a_plugin_declaring_its_other_spellings_as_aliases_loads(tmp_path: Path) -> None:
    load_plugins([f"{HERE}:paged"], Registry(), None, SqliteStore(tmp_path / "s"))


async def test_an_alias_is_accepted_with_a_warning_naming_the_parameter_to_use(tmp_path: Path) -> None:
    settings = records_settings(tmp_path, server={"plugins": [RECORDS, f"{HERE}:paged"]})
    async with aql_session(settings) as aql:
        published = await aql.call("mcp_aql_read", "get_page", page_size=3)
        aliased = await aql.call("mcp_aql_read", "get_page", pageSize=3, sort_order="desc")
    assert published["data"] == {"page_size": 3, "sort_order": "asc"}
    assert aliased["data"] == {"page_size": 3, "sort_order": "desc"}
    assert "warnings" not in published
    [notice] = aliased["warnings"]
    assert notice["code"] == "DEPRECATION_WARNING"
    assert notice["details"] == {"operation": "get_page", "deprecated_param": "pageSize", "replacement": "page_size"}
    assert "'page_size'" in notice["message"]


async def test_both_spellings_of_one_parameter_are_a_validation_error_naming_both(tmp_path: Path) -> None:
    settings = records_settings(tmp_path, server={"plugins": [RECORDS, f"{HERE}:paged"]})
    async with aql_session(settings) as aql:
        twice = await aql.call("mcp_aql_read", "get_page", page_size=3, pageSize=4)
        arguments = {"operation": "get_page", "sortOrder": "x", "params": {"sort_order": "y"}}
        nested = await aql.raw("mcp_aql_read", arguments)
    for result in (twice, check_result(nested)):
        assert result["error"]["code"] == "VALIDATION_INVALID_TYPE"
    assert set(twice["error"]["details"]["conflicting_params"]) == {"page_size", "pageSize"}
    assert "'page_size'" in twice["error"]["message"]
    assert "'pageSize'" in twice["error"]["message"]
    assert nested["error"]["details"]["conflicting_params"] == ["sort_order", "sortOrder"]


async def test_introspection_publishes_the_snake_case_names_and_lists_the_aliases_as_deprecated(
    tmp_path: Path,
) -> None:
    settings = records_settings(tmp_path, server={"plugins": [RECORDS, f"{HERE}:paged"]})
    async with aql_session(settings) as aql:
        details = await aql.call("mcp_aql_read", "introspect", query="operations", name="get_page")
    parameters = {p["name"]: p for p in details["data"]["operation"]["parameters"]}
    assert set(parameters) == {"page_size", "sort_order"}
    assert parameters["page_size"]["description"].startswith("Items per page. Deprecated alias: 'pageSize'")
    assert "send 'page_size'" in parameters["page_size"]["description"]
    assert "Deprecated alias: 'sortOrder'" in parameters["sort_order"]["description"]
