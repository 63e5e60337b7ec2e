"""`protocol/versions.py`: which versions exist, their era, and which edge a request goes to."""

from __future__ import annotations

import pytest

from aql_mcp.protocol.versions import (
    LEGACY_VERSIONS,
    MODERN_VERSIONS,
    Era,
    era_of,
    has_elicitation_mode,
    is_supported,
    request_era,
    supported_versions,
)


@pytest.mark.parametrize("version", LEGACY_VERSIONS)
def test_every_handshake_version_is_legacy_and_negotiable(version: str) -> None:
    assert era_of(version) is Era.LEGACY
    assert is_supported(version)


def test_2026_07_28_is_modern_and_never_negotiated_by_initialize() -> None:
    """MCP 2026-07-28 Versioning, "Terminology": modern versions have no handshake."""
    assert era_of("2026-07-28") is Era.MODERN
    assert not is_supported("2026-07-28")


def test_a_request_without_a_version_header_is_legacy_whatever_the_setting() -> None:
    assert request_era(None, modern_enabled=False) is Era.LEGACY
    assert request_era(None, modern_enabled=True) is Era.LEGACY


@pytest.mark.parametrize("version", ["2026-07-28", "1900-01-01", "2099-01-01"])
def test_with_the_modern_era_off_a_non_legacy_version_is_refused(version: str) -> None:
    assert request_era(version, modern_enabled=False) is Era.UNKNOWN


@pytest.mark.parametrize("version", ["2026-07-28", "1900-01-01"])
def test_with_the_modern_era_on_every_non_legacy_version_goes_to_the_modern_edge(version: str) -> None:
    """The modern edge answers an unknown version with -32022 after the checks the spec puts first."""
    assert request_era(version, modern_enabled=True) is Era.MODERN


@pytest.mark.parametrize("version", LEGACY_VERSIONS)
def test_a_legacy_version_header_stays_legacy_with_the_modern_era_on(version: str) -> None:
    assert request_era(version, modern_enabled=True) is Era.LEGACY


def test_supported_versions_name_modern_ones_only_when_served_newest_first() -> None:
    assert supported_versions(modern_enabled=False) == list(LEGACY_VERSIONS)
    served = supported_versions(modern_enabled=True)
    assert served == [*MODERN_VERSIONS, *LEGACY_VERSIONS]
    assert served == sorted(served, reverse=True)


def test_elicitation_names_its_mode_for_clients_of_2025_11_25_and_later() -> None:
    """MCP 2025-11-25 added `mode` to `elicitation/create`; a 2025-06-18 client rejects the field."""
    assert [has_elicitation_mode(v) for v in ("2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28")] == [
        False,
        False,
        True,
        True,
    ]
