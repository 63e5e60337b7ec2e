"""Every file a document or a comment points at is in the repository.

A newcomer with only the repository must be able to follow every pointer: a README line, a doc, a
docstring or a script comment naming a doc or a module that is not there (renamed, never written,
gitignored, or outside the repository) is a broken promise. Only what git would commit counts, so a
file this checkout generated does not hide a pointer a fresh clone would find broken. The CHANGELOG
is history and may name files that were removed since, and tests quote paths as data (an agent's
step, a request), so neither is read; a quoted path in code is a string, not a pointer.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOP_DIRS = ("src", "docs", "scripts", "tests", "helm", "bench", "config", "examples", "deploy", "requirements")
# A repository path: one of the top-level folders, then path characters. Placeholders (`<name>`,
# `{id}`, `*`) and elisions are not pointers to one file.
PATH = re.compile(r"(?<![\w./-])(?:" + "|".join(TOP_DIRS) + r")/[A-Za-z0-9_./-]*[A-Za-z0-9_/]")
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
PLACEHOLDER = re.compile(r"[<>{}*]|\.\.\.")
READ_SUFFIXES = (".md", ".py", ".sh", ".yaml", ".yml", ".toml", ".txt", ".tpl", ".cfg", ".json")
READ_NAMES = ("Dockerfile", "Makefile")
# Folders the project's own commands write into (gitignored): naming them is naming an output.
OUTPUTS = ("bench/results/",)


def _tracked_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return [ROOT / name for name in listed if (ROOT / name).is_file()]


def _documents() -> list[Path]:
    return [
        path
        for path in _tracked_files()
        if (path.suffix in READ_SUFFIXES or path.name in READ_NAMES or path.name.endswith("Dockerfile"))
        and path.name != "CHANGELOG.md"
        and path.relative_to(ROOT).parts[0] != "tests"
    ]


def _known() -> set[str]:
    """Every committable file and every folder above one, relative to the root."""
    known: set[str] = set()
    for path in _tracked_files():
        relative = path.relative_to(ROOT)
        known.add(relative.as_posix())
        known.update(parent.as_posix() for parent in relative.parents)
    return known


def _exists(reference: str, document: Path, known: set[str]) -> bool:
    candidate = reference.rstrip("/.")
    if candidate.startswith(OUTPUTS):
        return True
    beside = (document.parent / candidate).resolve()
    relative = beside.relative_to(ROOT).as_posix() if beside.is_relative_to(ROOT) else None
    return candidate in known or relative in known


def _pointers(document: Path) -> list[str]:
    text = document.read_text(encoding="utf-8", errors="replace")
    found: list[str] = []
    for match in PATH.finditer(text):
        tail = text[match.end() : match.end() + 1]
        head = text[match.start() - 1 : match.start()]
        if (tail and tail in "<{*") or (head and head in "\"'"):
            continue  # a pattern such as `store/<engine>/x.py`, or a string in code
        found.append(match.group(0))
    if document.suffix == ".md":
        found += [link for link in LINK.findall(text) if "://" not in link and not link.startswith("mailto:")]
    return [reference for reference in found if not PLACEHOLDER.search(reference) and _names_a_file(reference)]


def _names_a_file(reference: str) -> bool:
    """A file with a suffix, a Dockerfile or Makefile, or a folder written with its slash: what is
    left (`deploy/aql-mcp` in a kubectl command) names something else."""
    last = reference.rstrip("/").rsplit("/", 1)[-1]
    return "." in last or last in READ_NAMES or reference.endswith("/")


def test_every_path_named_in_the_repository_exists() -> None:
    known = _known()
    missing = sorted(
        f"{document.relative_to(ROOT)}: {reference}"
        for document in _documents()
        for reference in _pointers(document)
        if not _exists(reference, document, known)
    )
    assert not missing, "pointers to files that are not in the repository:\n" + "\n".join(missing)


ESCAPE = re.compile(r"(?<![\w.])(?:\.\./)+[\w.-]+")


def test_no_relative_path_climbs_out_of_the_repository() -> None:
    """A newcomer has the repository and nothing beside it: a decision the code relies on is written
    here (README or docs/), never in a folder next to the checkout."""
    offenders = [
        f"{document.relative_to(ROOT)}: {reference}"
        for document in _documents()
        for reference in ESCAPE.findall(document.read_text(encoding="utf-8", errors="replace"))
        if not (document.parent / reference).resolve().is_relative_to(ROOT)
    ]
    assert not offenders
