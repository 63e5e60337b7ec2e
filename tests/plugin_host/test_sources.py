"""Where plugins come from: the two lists, then installed packages' entry points (`aql_mcp.plugins`)."""

from __future__ import annotations

from collections.abc import Iterator
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from aql_mcp.exceptions import ConfigError
from aql_mcp.plugin_host.loader import load_plugins
from aql_mcp.plugin_host.sources import ENTRY_POINT_GROUP, PluginSource, plugin_sources
from aql_mcp.protocol.primitives import Registry
from aql_mcp.settings import BUILTIN_PLUGINS, Settings
from tests.support.distribution import fake_distribution

TUNED = "tests.support.tuned:plugin"


def point(name: str, value: str) -> EntryPoint:
    return EntryPoint(name, value, ENTRY_POINT_GROUP)


def settings(**server: object) -> Settings:
    return Settings(server={"builtin_plugins": ["pkg.builtin:plugin"], "plugins": ["pkg.extra:plugin"], **server})


def test_entry_points_load_after_both_lists_sorted_by_name() -> None:
    sources = plugin_sources(settings(), [point("zeta", "z:plugin"), point("alpha", "a:plugin")])
    assert [(s.path, s.origin, s.entry_point) for s in sources] == [
        ("pkg.builtin:plugin", "server.builtin_plugins", None),
        ("pkg.extra:plugin", "server.plugins", None),
        ("a:plugin", "entry point alpha", "alpha"),
        ("z:plugin", "entry point zeta", "zeta"),
    ]


def test_without_entry_points_only_the_lists_load() -> None:
    assert [s.path for s in plugin_sources(Settings(), [])] == list(BUILTIN_PLUGINS)


def test_an_entry_point_already_listed_loads_once_from_its_list() -> None:
    sources = plugin_sources(settings(), [point("extra", "pkg.extra:plugin")])
    assert [s.path for s in sources] == ["pkg.builtin:plugin", "pkg.extra:plugin"]


def test_the_same_entry_point_seen_twice_on_the_path_counts_once() -> None:
    sources = plugin_sources(settings(), [point("alpha", "a:plugin"), point("alpha", "a:plugin")])
    assert [s.path for s in sources][2:] == ["a:plugin"]


def test_two_packages_offering_one_name_are_refused_naming_both() -> None:
    with pytest.raises(ConfigError) as caught:
        plugin_sources(settings(), [point("alpha", "a:plugin"), point("alpha", "b:plugin")])
    assert "a:plugin" in str(caught.value)
    assert "b:plugin" in str(caught.value)


def test_a_disabled_entry_point_is_left_out_without_being_imported() -> None:
    sources = plugin_sources(
        settings(disabled_plugins=["broken"]), [point("broken", "no_such_module:x"), point("alpha", "a:plugin")]
    )
    assert [s.path for s in sources][2:] == ["a:plugin"]


def test_entry_point_plugins_off_loads_only_the_lists() -> None:
    sources = plugin_sources(settings(entry_point_plugins=False), [point("alpha", "a:plugin")])
    assert [s.path for s in sources] == ["pkg.builtin:plugin", "pkg.extra:plugin"]


def test_disabling_a_name_no_package_offers_is_refused_naming_the_setting() -> None:
    with pytest.raises(ConfigError, match=r"server\.disabled_plugins.*alhpa"):
        plugin_sources(settings(disabled_plugins=["alhpa"]), [point("alpha", "a:plugin")])


def test_the_installed_entry_points_are_read_when_none_are_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = fake_distribution(tmp_path, "tuned-plugin", {"tuned": TUNED})
    monkeypatch.syspath_prepend(str(site))
    sources = plugin_sources(Settings())
    assert [(s.path, s.origin) for s in sources if s.entry_point == "tuned"] == [
        (TUNED, "entry point tuned of tuned-plugin 1.0")
    ]


def test_an_entry_point_that_cannot_be_imported_fails_naming_the_entry_point() -> None:
    source = PluginSource("no_such_module:plugin", "entry point ghost of ghost-plugin 1.0", "ghost")
    with pytest.raises(ConfigError) as caught:
        load_plugins([source], Registry())
    assert "entry point ghost of ghost-plugin 1.0" in str(caught.value)
    assert "no_such_module" in str(caught.value)


def test_an_entry_point_whose_module_fails_on_import_fails_startup_naming_the_entry_point() -> None:
    source = PluginSource("tests.support.broken_plugin:plugin", "entry point broken of broken-plugin 1.0", "broken")
    with pytest.raises(ConfigError) as caught:
        load_plugins([source], Registry())
    assert "entry point broken of broken-plugin 1.0" in str(caught.value)
    assert "RuntimeError" in str(caught.value)


def test_an_entry_point_named_other_than_its_plugin_is_refused() -> None:
    source = PluginSource(TUNED, "entry point tuning of tuned-plugin 1.0", "tuning")
    with pytest.raises(ConfigError, match=r"entry point tuning of tuned-plugin 1\.0"):
        load_plugins([source], Registry())


def test_two_plugins_with_one_name_are_refused_naming_both_sources() -> None:
    sources = [
        PluginSource(TUNED, "server.plugins"),
        PluginSource("tests.support.tuned:Tuned", "entry point tuned", "tuned"),
    ]
    with pytest.raises(ConfigError) as caught:
        load_plugins(sources, Registry())
    assert "server.plugins" in str(caught.value)
    assert "entry point tuned" in str(caught.value)


def test_with_entry_points_off_none_is_read_so_a_clash_or_a_stale_disabled_name_stops_nothing() -> None:
    def unreadable() -> Iterator[EntryPoint]:
        raise AssertionError("entry points read")
        yield point("alpha", "a:plugin")

    off = settings(entry_point_plugins=False, disabled_plugins=["gone"])
    assert [s.path for s in plugin_sources(off, unreadable())] == ["pkg.builtin:plugin", "pkg.extra:plugin"]


def test_two_packages_offering_a_disabled_name_are_left_out_instead_of_refused() -> None:
    clash = [point("alpha", "a:plugin"), point("alpha", "b:plugin"), point("zeta", "z:plugin")]
    sources = plugin_sources(settings(disabled_plugins=["alpha"]), clash)
    assert [s.path for s in sources][2:] == ["z:plugin"]


def test_a_plugin_both_listed_and_disabled_is_refused_naming_both_settings() -> None:
    """docs/plugins.md: `server.disabled_plugins` never overrides a list silently."""
    listed = Settings(server={"plugins": [TUNED], "disabled_plugins": ["tuned"], "builtin_plugins": []})
    sources = plugin_sources(listed, [point("tuned", TUNED)])
    with pytest.raises(ConfigError) as caught:
        load_plugins(sources, Registry(), listed)
    assert "server.plugins" in str(caught.value)
    assert "server.disabled_plugins" in str(caught.value)
