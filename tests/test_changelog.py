"""The CHANGELOG follows Keep a Changelog: an Unreleased section, dated releases newest first, the
newest one the version pyproject.toml builds, and a comparison link under every heading."""

from __future__ import annotations

import itertools
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEXT = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
HEADINGS = re.findall(r"^## \[([^\]]+)\](?: - (\d{4}-\d{2}-\d{2}))?$", TEXT, flags=re.MULTILINE)
LINKS = dict(re.findall(r"^\[([^\]]+)\]: (\S+)$", TEXT, flags=re.MULTILINE))


def test_unreleased_comes_first_then_dated_releases_newest_first() -> None:
    assert HEADINGS[0] == ("Unreleased", "")
    releases = HEADINGS[1:]
    assert releases
    assert all(date for _, date in releases)
    versions = [tuple(int(part) for part in version.split(".")) for version, _ in releases]
    assert versions == sorted(versions, reverse=True)


def test_the_newest_release_is_the_version_the_project_builds() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert HEADINGS[1][0] == project["version"]


def test_every_heading_links_to_its_comparison_with_the_release_before() -> None:
    names = [version for version, _ in HEADINGS]
    assert set(LINKS) == set(names)
    tags = [f"v{version}" for version in names[1:]]
    assert LINKS["Unreleased"].endswith(f"/compare/{tags[0]}...HEAD")
    for newer, older in itertools.pairwise(tags):
        assert LINKS[newer[1:]].endswith(f"/compare/{older}...{newer}")
    assert LINKS[names[-1]].endswith(f"/releases/tag/{tags[-1]}")


def test_each_release_names_each_kind_of_change_once() -> None:
    """Keep a Changelog groups a release's entries under one heading per kind; two `### Added` in
    one release (what merging branches leaves) split what a reader looks for in one place."""
    for release in re.split(r"^## ", TEXT, flags=re.MULTILINE)[1:]:
        kinds = re.findall(r"^### (.+)$", release, flags=re.MULTILINE)
        assert len(kinds) == len(set(kinds)), release.splitlines()[0]
