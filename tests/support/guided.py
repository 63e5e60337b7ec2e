"""A plugin that serves a usage guide of its own as a skill, written with `aql_mcp.plugin` alone:
a SKILL.md under an organising prefix, a markdown reference and a binary file."""

from __future__ import annotations

from aql_mcp.plugin import Registry, Skill, SkillFile

GUIDE = "# Guided\n\nRead [the notes](references/notes.md) first; the table is in data/.\n"
NOTES = "Notes: line one\r\nline two, ünïcode\n"
TABLE = bytes(range(256))
URI = "skill://acme/tools/guided-usage/SKILL.md"


class Guided:
    name = "guided"

    def register(self, registry: Registry) -> None:
        files = (
            SkillFile("references/notes.md", lambda: NOTES),
            SkillFile("data/table.bin", lambda: TABLE, "application/octet-stream"),
        )
        registry.add_skill(
            Skill.of("guided-usage", "How to use the guided plugin's tools", GUIDE, files=files, prefix="acme/tools")
        )


plugin = Guided()
