"""A skill of the Skills extension (`io.modelcontextprotocol/skills`, SEP-2640; docs/discovery.md).

A skill is a directory of files served as resources under `skill://<prefix/>name/...`: its
`SKILL.md` (YAML frontmatter with at least `name` and `description`, then markdown) and any
supporting files. A file's content may be written when it is read (the MCP-AQL agent guide names
today's operations); its digest and size are taken from the same bytes a read returns, so the
manifest a listing carries always matches what `resources/read` serves at that moment.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib.resources import files as package_files
from typing import Any

import yaml

from aql_mcp.exceptions import ConfigError

EXTENSION = "io.modelcontextprotocol/skills"
SCHEME = "skill://"
SKILL_FILE = "SKILL.md"
MARKDOWN = "text/markdown"
# The Agent Skills naming rule the extension adopts: 1-64 lower-case letters, digits and single
# hyphens, neither first nor last.
SKILL_NAME = re.compile(r"^(?!-)(?!.*--)[a-z0-9-]{1,64}(?<!-)$")
PATH_SEGMENT = re.compile(r"^[A-Za-z0-9._-]+$")
# The per-skill limits every conforming host accepts (SEP-2640, "Limits").
MAX_FILES = 512
MAX_TOTAL_BYTES = 16 * 1024 * 1024
# The media type of a packaged file by its suffix; anything else is served as bytes (a blob).
MEDIA_TYPES = {
    "md": MARKDOWN,
    "txt": "text/plain",
    "json": "application/json",
    "py": "text/x-python",
    "sh": "text/x-shellscript",
    "yaml": "application/yaml",
    "csv": "text/csv",
}
FRONTMATTER = re.compile(r"\A---\r?\n(.*?)\r?\n---\r?\n", re.DOTALL)

Content = Callable[[], str | bytes]


@dataclass(frozen=True, slots=True)
class SkillFile:
    """One supporting file: its path inside the skill (`references/operations.md`), its content
    (text is served as UTF-8), and its media type."""

    path: str
    content: Content
    mime_type: str = MARKDOWN

    def data(self) -> bytes:
        value = self.content()
        return value.encode("utf-8") if isinstance(value, str) else value


@dataclass(frozen=True, slots=True)
class Skill:
    """A skill: its frontmatter (at least `name` and `description`), its SKILL.md as served (the
    frontmatter, then markdown), its supporting files, and an optional organising `prefix` before
    the name (`acme/billing`). Build one with `Skill.of` or `Skill.from_package`."""

    frontmatter: Mapping[str, Any]
    document: Callable[[], bytes]
    files: tuple[SkillFile, ...] = ()
    prefix: str = ""

    def __post_init__(self) -> None:
        check_skill(self)

    @classmethod
    def of(
        cls,
        name: str,
        description: str,
        body: str | Callable[[], str],
        *,
        files: tuple[SkillFile, ...] = (),
        prefix: str = "",
        metadata: Mapping[str, str] | None = None,
    ) -> Skill:
        """A skill whose SKILL.md this server writes: the frontmatter from the arguments, then
        `body` (a callable is called at each read, so the text may follow what the server serves)."""
        frontmatter: dict[str, Any] = {"name": name, "description": description}
        if metadata:
            frontmatter["metadata"] = dict(metadata)
        header = yaml.safe_dump(frontmatter, sort_keys=False, allow_unicode=True, width=10_000)

        def document() -> bytes:
            text = body() if callable(body) else body
            return f"---\n{header}---\n\n{text}".encode()

        return cls(frontmatter, document, files, prefix)

    @classmethod
    def from_package(cls, package: str, directory: str, *, prefix: str = "") -> Skill:
        """The skill in `directory` of an installed package: its SKILL.md as written and every other
        file below it, read once at startup."""
        root = package_files(package).joinpath(directory)
        found = _walk(root, "") if root.is_dir() else {}
        document = found.pop(SKILL_FILE, None)
        if document is None:
            raise ConfigError(f"skill {package}/{directory}: no {SKILL_FILE}")
        total = len(document) + sum(len(data) for data in found.values())
        if total > MAX_TOTAL_BYTES:
            # SEP-2640 "Limits": a larger skill is not guaranteed to load on any host.
            raise ConfigError(f"skill {package}/{directory}: {total} bytes, more than {MAX_TOTAL_BYTES}")
        supporting = tuple(SkillFile(path, _constant(data), _mime_type(path)) for path, data in sorted(found.items()))
        return cls(parse_frontmatter(document), _constant(document), supporting, prefix)

    @property
    def name(self) -> str:
        return str(self.frontmatter.get("name", ""))

    @property
    def root(self) -> str:
        """The skill's directory URI, without a trailing slash (SEP-2640, "Resource Mapping")."""
        return f"{SCHEME}{self.prefix}/{self.name}" if self.prefix else f"{SCHEME}{self.name}"

    @property
    def uri(self) -> str:
        return f"{self.root}/{SKILL_FILE}"

    def contents(self) -> list[tuple[str, str, Callable[[], bytes]]]:
        """(uri, media type, bytes) of every file, SKILL.md first."""
        out: list[tuple[str, str, Callable[[], bytes]]] = [(self.uri, MARKDOWN, self.document)]
        out.extend((f"{self.root}/{file.path}", file.mime_type, file.data) for file in self.files)
        return out

    def entry(self) -> dict[str, Any]:
        """The extension's `Skill` entry: the URI, the frontmatter, and every file's digest and size
        taken from the bytes a read returns now."""
        manifest = []
        for uri, _, data in self.contents():
            raw = data()
            manifest.append({"uri": uri, "digest": "sha256:" + hashlib.sha256(raw).hexdigest(), "size": len(raw)})
        return {"uri": self.uri, "frontmatter": dict(self.frontmatter), "resources": manifest}


def check_skill(skill: Skill) -> None:
    """ConfigError unless the skill keeps the extension's rules: a valid name, a URI-safe prefix,
    relative file paths met once, within the file-count limit."""
    name, description = skill.frontmatter.get("name"), skill.frontmatter.get("description")
    if not isinstance(name, str) or not SKILL_NAME.fullmatch(name):
        raise ConfigError(f"skill {name!r}: a name is 1-64 lower-case letters, digits and single hyphens")
    if not isinstance(description, str) or not description.strip():
        raise ConfigError(f"skill {name!r}: the frontmatter needs a description")
    for segment in skill.prefix.split("/") if skill.prefix else ():
        if not PATH_SEGMENT.fullmatch(segment) or segment in (".", ".."):
            raise ConfigError(f"skill {skill.name!r}: prefix {skill.prefix!r} is not a relative path")
    paths = [file.path for file in skill.files]
    for path in paths:
        segments = path.split("/")
        if path == SKILL_FILE or any(not PATH_SEGMENT.fullmatch(s) or s in (".", "..") for s in segments):
            raise ConfigError(f"skill {skill.name!r}: file path {path!r} is not a relative path of its own")
    if len(set(paths)) != len(paths):
        raise ConfigError(f"skill {skill.name!r}: a file path is given twice")
    if len(paths) + 1 > MAX_FILES:
        raise ConfigError(f"skill {skill.name!r}: more than {MAX_FILES} files")


def parse_frontmatter(document: bytes) -> dict[str, Any]:
    """The YAML frontmatter of a SKILL.md as a JSON-like object ({} when there is none)."""
    match = FRONTMATTER.match(document.decode("utf-8"))
    if match is None:
        return {}
    loaded = yaml.safe_load(match.group(1))
    return loaded if isinstance(loaded, dict) else {}


def _walk(node: Any, prefix: str) -> dict[str, bytes]:
    found: dict[str, bytes] = {}
    for child in node.iterdir():
        path = f"{prefix}{child.name}"
        if child.is_dir():
            if child.name != "__pycache__":
                found.update(_walk(child, f"{path}/"))
        elif not child.name.endswith(".pyc"):  # bytecode is the interpreter's, not the skill's
            found[path] = child.read_bytes()
    return found


def _mime_type(path: str) -> str:
    suffix = path.rpartition(".")[2] if "." in path else ""
    return MEDIA_TYPES.get(suffix, "application/octet-stream")


def _constant(value: Any) -> Callable[[], Any]:
    return lambda: value
