"""The skill model (`protocol/skill.py`), checked against the Skills extension (SEP-2640,
`io.modelcontextprotocol/skills`, stable specification of modelcontextprotocol/ext-skills).

What is checked, in our words:
- a skill's name is 1-64 lower-case letters, digits and hyphens, no hyphen first, last or doubled;
- SKILL.md starts with YAML frontmatter holding at least `name` and `description`, and an entry's
  `frontmatter` is that YAML as a JSON object, field for field;
- the SKILL.md URI is `skill://<prefix/>name/SKILL.md`, the last path segment before SKILL.md is
  the name, and supporting files sit under the same root;
- every file is in the manifest once, SKILL.md included, with `digest` = `sha256:` and 64 lower-case
  hex digits of its bytes and `size` = their length;
- at most 512 files per skill.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest
import yaml

from aql_mcp.exceptions import ConfigError
from aql_mcp.protocol.primitives import Registry
from aql_mcp.protocol.skill import MAX_FILES, Skill, SkillFile, parse_frontmatter

DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


def test_a_written_skill_has_frontmatter_then_body_and_an_entry_measuring_its_bytes() -> None:
    skill = Skill.of(
        "pdf-forms",
        "Fill PDF forms: naïve ones too",
        "# Forms\n\nUse templates/.\n",
        files=(SkillFile("templates/a.md", lambda: "A\r\n"),),
        metadata={"version": "2"},
    )
    document = skill.document()
    assert document.startswith(b"---\n")
    assert yaml.safe_load(document.split(b"---\n")[1]) == {
        "name": "pdf-forms",
        "description": "Fill PDF forms: naïve ones too",
        "metadata": {"version": "2"},
    }
    assert document.endswith(b"# Forms\n\nUse templates/.\n")

    entry = skill.entry()
    assert entry["uri"] == "skill://pdf-forms/SKILL.md"
    assert entry["frontmatter"] == parse_frontmatter(document)
    files = {item["uri"]: item for item in entry["resources"]}
    assert list(files) == ["skill://pdf-forms/SKILL.md", "skill://pdf-forms/templates/a.md"]
    for item, raw in zip(entry["resources"], (document, b"A\r\n"), strict=True):
        assert DIGEST.fullmatch(item["digest"])
        assert item["digest"] == "sha256:" + hashlib.sha256(raw).hexdigest()
        assert item["size"] == len(raw)


def test_a_prefix_goes_before_the_name_and_the_name_stays_last() -> None:
    skill = Skill.of("refunds", "Refunds", "x", prefix="acme/billing")

    assert skill.root == "skill://acme/billing/refunds"
    assert skill.uri == "skill://acme/billing/refunds/SKILL.md"
    assert skill.uri.rsplit("/", 2)[-2] == skill.frontmatter["name"]


def test_a_body_written_at_each_read_is_measured_as_it_is_now() -> None:
    text = ["first"]
    skill = Skill.of("live", "Changes", lambda: text[0])
    before = skill.entry()["resources"][0]
    text[0] = "second, longer"
    after = skill.entry()["resources"][0]

    assert before["digest"] != after["digest"]
    assert after["size"] == len(skill.document())


@pytest.mark.parametrize("name", ["", "-lead", "trail-", "dou--ble", "Upper", "under_score", "a" * 65, "sp ace"])
def test_names_outside_the_agent_skills_rule_are_refused(name: str) -> None:
    with pytest.raises(ConfigError, match="name"):
        Skill.of(name, "d", "body")


def test_a_description_is_required() -> None:
    with pytest.raises(ConfigError, match="description"):
        Skill.of("ok", "  ", "body")


@pytest.mark.parametrize("path", ["SKILL.md", "../up.md", "/abs.md", "a//b.md", "a/./b.md", "sp ace.md"])
def test_file_paths_must_be_relative_and_distinct_from_skill_md(path: str) -> None:
    with pytest.raises(ConfigError, match="file path"):
        Skill.of("ok", "d", "body", files=(SkillFile(path, lambda: "x"),))


def test_a_file_given_twice_and_too_many_files_are_refused() -> None:
    twice = (SkillFile("a.md", lambda: "x"), SkillFile("a.md", lambda: "y"))
    with pytest.raises(ConfigError, match="twice"):
        Skill.of("ok", "d", "body", files=twice)
    many = tuple(SkillFile(f"f{index}.md", lambda: "x") for index in range(MAX_FILES))
    with pytest.raises(ConfigError, match=str(MAX_FILES)):
        Skill.of("ok", "d", "body", files=many)


def test_a_packaged_skill_is_served_as_written_with_every_file_below_it() -> None:
    skill = Skill.from_package("aql_mcp.plugins.records", "skill")

    assert skill.name == "records-workspace"
    uris = [item["uri"] for item in skill.entry()["resources"]]
    assert uris == ["skill://records-workspace/SKILL.md", "skill://records-workspace/references/examples.md"]
    assert skill.entry()["frontmatter"] == yaml.safe_load(skill.document().split(b"---\n")[1])


def test_a_package_directory_without_skill_md_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"no SKILL\.md"):
        Skill.from_package("aql_mcp.plugins.records", "missing")


def test_a_skill_registered_twice_stops_startup_naming_both_plugins() -> None:
    registry = Registry()
    registry.plugin = "first"
    registry.add_skill(Skill.of("twin", "d", "body"))
    registry.plugin = "second"
    with pytest.raises(ConfigError, match=r"first.*second"):
        registry.add_skill(Skill.of("twin", "other", "body"))


def test_skill_files_resolve_for_reads_but_stay_out_of_the_resource_listing() -> None:
    registry = Registry()
    skill = Skill.of("guide", "d", "body", files=(SkillFile("a.md", lambda: "A"),))
    registry.add_skill(skill)

    assert [resource.uri for resource in registry.resources()] == []
    for uri in ("skill://guide/SKILL.md", "skill://guide/a.md"):
        found = registry.resolve(uri)
        assert found is not None
        assert found[0].uri == uri
    skill_md = registry.resolve(skill.uri)
    assert skill_md is not None
    assert skill_md[0].to_wire() == {
        "uri": "skill://guide/SKILL.md",
        "name": "guide",
        "description": "d",
        "mimeType": "text/markdown",
    }


def write_package(root: Path, name: str, files: dict[str, bytes]) -> None:
    package = root / name
    (package / "skill").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    for path, data in files.items():
        (package / "skill" / path).parent.mkdir(parents=True, exist_ok=True)
        (package / "skill" / path).write_bytes(data)


def test_a_packaged_frontmatter_passes_through_verbatim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    document = (
        b"---\nname: verbatim\ndescription: As written\nlicense: Apache-2.0\nmetadata:\n  team: x\n---\r\nBody\r\n"
    )
    write_package(tmp_path, "verbatim_skill", {"SKILL.md": document, "scripts/run.py": b"print(1)\n"})
    monkeypatch.syspath_prepend(str(tmp_path))

    skill = Skill.from_package("verbatim_skill", "skill")

    assert skill.document() == document
    assert skill.entry()["frontmatter"] == {
        "name": "verbatim",
        "description": "As written",
        "license": "Apache-2.0",
        "metadata": {"team": "x"},
    }
    assert [item["uri"] for item in skill.entry()["resources"]] == [
        "skill://verbatim/SKILL.md",
        "skill://verbatim/scripts/run.py",
    ]
    assert [(file.path, file.mime_type) for file in skill.files] == [("scripts/run.py", "text/x-python")]


def test_a_packaged_skill_over_16_mib_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    document = b"---\nname: huge\ndescription: Too big\n---\n"
    write_package(tmp_path, "huge_skill", {"SKILL.md": document, "data.bin": b"\0" * (16 * 1024 * 1024)})
    monkeypatch.syspath_prepend(str(tmp_path))

    with pytest.raises(ConfigError, match="more than 16777216"):
        Skill.from_package("huge_skill", "skill")
