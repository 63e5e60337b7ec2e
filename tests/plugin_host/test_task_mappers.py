"""At most one plugin maps the tasks of each era (plugin_host/task_mappers.py)."""

from __future__ import annotations

import pytest

from aql_mcp.exceptions import ConfigError
from aql_mcp.plugin_host.task_mappers import only_one


def test_the_one_mapper_offered_is_taken_and_plugins_offering_none_do_not_count() -> None:
    assert only_one([("a", None), ("b", "mapper"), ("c", None)], "maps tasks") == "mapper"
    assert only_one([("a", None)], "maps tasks") is None
    assert only_one([], "maps tasks") is None


def test_two_mappers_are_refused_naming_both_plugins() -> None:
    with pytest.raises(ConfigError, match=r"plugins a, c: each maps tasks; at most one plugin may"):
        only_one([("a", "one"), ("b", None), ("c", "two")], "maps tasks")
