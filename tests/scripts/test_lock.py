"""scripts/lock.sh: the hashed lock files under requirements/ agree with what they were made from.

Everything installs from the lock with `pip install --require-hashes --no-deps` (the Makefile, CI through
`make test`, the Dockerfile), so a pin changed in pyproject.toml without `make lock` would be silently
ignored. These checks read files only (no network, no resolution): a stale lock fails here first.
"""

from __future__ import annotations

import importlib.metadata
import json
import re
import subprocess
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.support.versions import CONFORMANCE_ALPHA, OIDC_PROVIDER_PACKAGE, OIDC_PROVIDER_VERSION, TS_CLIENT_VERSION

ROOT = Path(__file__).resolve().parents[2]
REQUIREMENTS = ROOT / "requirements"
LOCKS = ("build", "runtime", "dev", "tools", "helm", "profile")
HASH = re.compile(r"--hash=sha256:[0-9a-f]{64}")
NPM = REQUIREMENTS / "npm"


@dataclass(frozen=True)
class Pin:
    version: str
    hashes: int


def read_lock(name: str) -> dict[str, Pin]:
    """Package name -> its pinned version and how many file hashes it lists."""
    text = (REQUIREMENTS / f"{name}.txt").read_text(encoding="utf-8")
    logical = re.sub(r"\\\n", " ", text)
    pins: dict[str, Pin] = {}
    for line in (line.strip() for line in logical.splitlines()):
        if not line or line.startswith("#"):
            continue
        requirement = Requirement(line.split(" --hash", 1)[0])
        (specifier,) = requirement.specifier
        assert specifier.operator == "==", f"{name}.txt: {line[:80]} is not pinned"
        pins[canonicalize_name(requirement.name)] = Pin(specifier.version, len(HASH.findall(line)))
    return pins


def declared(requirements: list[str]) -> list[Requirement]:
    return [Requirement(line) for line in requirements]


def read_in(name: str) -> list[Requirement]:
    lines = (REQUIREMENTS / f"{name}.in").read_text(encoding="utf-8").splitlines()
    return declared([line for line in lines if line.strip() and not line.startswith("#")])


@pytest.fixture(scope="module")
def pyproject() -> dict[str, object]:
    with (ROOT / "pyproject.toml").open("rb") as file:
        return tomllib.load(file)


@pytest.fixture(scope="module")
def locks() -> dict[str, dict[str, Pin]]:
    return {name: read_lock(name) for name in LOCKS}


def assert_locked(requirements: list[Requirement], lock: dict[str, Pin], lock_name: str) -> None:
    for requirement in requirements:
        pin = lock.get(canonicalize_name(requirement.name))
        assert pin is not None, f"{requirement.name} is not in requirements/{lock_name}.txt: run `make lock`"
        assert requirement.specifier.contains(pin.version, prereleases=True), (
            f"{requirement} is locked at {pin.version} in requirements/{lock_name}.txt: run `make lock`"
        )


def test_every_line_of_every_lock_is_pinned_with_a_hash(locks: dict[str, dict[str, Pin]]) -> None:
    for name, lock in locks.items():
        assert lock, f"requirements/{name}.txt is empty"
        for package, pin in lock.items():
            assert pin.hashes >= 1, f"requirements/{name}.txt: {package} has no hash"


def test_runtime_lock_holds_every_project_dependency_at_its_pyproject_pin(
    pyproject: dict[str, object], locks: dict[str, dict[str, Pin]]
) -> None:
    dependencies = declared(pyproject["project"]["dependencies"])  # type: ignore[index]
    assert_locked(dependencies, locks["runtime"], "runtime")
    assert_locked(dependencies, locks["dev"], "dev")


def test_dev_lock_holds_every_dev_extra_at_its_pyproject_pin(
    pyproject: dict[str, object], locks: dict[str, dict[str, Pin]]
) -> None:
    assert_locked(declared(pyproject["project"]["optional-dependencies"]["dev"]), locks["dev"], "dev")  # type: ignore[index]


def test_build_backend_is_locked_so_the_project_builds_without_isolation(
    pyproject: dict[str, object], locks: dict[str, dict[str, Pin]]
) -> None:
    backend = declared(pyproject["build-system"]["requires"])  # type: ignore[index]
    assert_locked(backend, locks["build"], "build")
    assert_locked(backend, locks["dev"], "dev")


def test_dev_lock_keeps_the_runtime_and_build_versions(locks: dict[str, dict[str, Pin]]) -> None:
    """dev.txt is compiled with runtime.txt and build.txt as constraints: one version per package."""
    for base in ("runtime", "build"):
        for package, pin in locks[base].items():
            assert locks["dev"][package].version == pin.version, f"{package}: dev.txt and {base}.txt differ"


def test_runtime_lock_holds_no_development_tool(locks: dict[str, dict[str, Pin]]) -> None:
    """`make run` and the image install the runtime lock: none of the checkers come with it."""
    assert not {"pytest", "mypy", "ruff", "uv", "hypothesis", "playwright"} & locks["runtime"].keys()


def test_tool_locks_hold_the_pins_of_their_inputs(locks: dict[str, dict[str, Pin]]) -> None:
    assert_locked(read_in("tools"), locks["tools"], "tools")
    assert_locked(read_in("helm"), locks["helm"], "helm")
    assert_locked(read_in("profile"), locks["profile"], "profile")
    # helm.txt is the one wheel the helm binary is taken from, without the CDK it would pull in.
    assert len(locks["helm"]) == 1


# The interpreter and platform the image and CI run: markers are evaluated for it, not this machine.
TARGET = {
    "implementation_name": "cpython",
    "implementation_version": "3.11.0",
    "os_name": "posix",
    "platform_machine": "x86_64",
    "platform_python_implementation": "CPython",
    "platform_release": "",
    "platform_system": "Linux",
    "platform_version": "",
    "python_full_version": "3.11.0",
    "python_version": "3.11",
    "sys_platform": "linux",
}


def closure(roots: list[Requirement]) -> set[str]:
    """Every distribution `roots` need on the target, walking the installed metadata's Requires-Dist
    (extras followed, markers evaluated for the target)."""
    seen: set[tuple[str, frozenset[str]]] = set()
    pending = [(canonicalize_name(r.name), frozenset(r.extras)) for r in roots if is_needed(r, frozenset())]
    while pending:
        node = pending.pop()
        if node in seen:
            continue
        seen.add(node)
        name, extras = node
        for line in importlib.metadata.distribution(name).requires or []:
            requirement = Requirement(line)
            if is_needed(requirement, extras):
                pending.append((canonicalize_name(requirement.name), frozenset(requirement.extras)))
    return {name for name, _ in seen}


def is_needed(requirement: Requirement, extras: frozenset[str]) -> bool:
    if requirement.marker is None:
        return True
    return any(requirement.marker.evaluate({**TARGET, "extra": extra}) for extra in {"", *extras})


def test_is_needed_follows_extras_and_markers_of_the_target() -> None:
    """The control for the closure tests: a Windows-only or PyPy-only dependency is not needed, an
    extra's is only with that extra."""
    assert is_needed(Requirement("h11>=0.8"), frozenset())
    assert not is_needed(Requirement('colorama; sys_platform == "win32"'), frozenset())
    assert not is_needed(Requirement('uvloop; extra == "standard"'), frozenset())
    assert is_needed(Requirement('uvloop; extra == "standard"'), frozenset({"standard"}))
    assert not is_needed(Requirement('cffi; platform_python_implementation == "PyPy"'), frozenset())


def test_runtime_lock_holds_the_whole_dependency_closure(
    pyproject: dict[str, object], locks: dict[str, dict[str, Pin]]
) -> None:
    """--no-deps installs exactly the lock: a transitive dependency missing from it (h11 under
    uvicorn) would be missing from the image."""
    needed = closure(declared(pyproject["project"]["dependencies"]))  # type: ignore[index]
    assert {"h11", "uvloop", "annotated-types"} <= needed  # uvicorn's, uvicorn[standard]'s, pydantic's
    assert not needed - locks["runtime"].keys(), "missing from requirements/runtime.txt: run `make lock`"


def test_dev_lock_holds_the_whole_dependency_closure_of_the_dev_extra(
    pyproject: dict[str, object], locks: dict[str, dict[str, Pin]]
) -> None:
    project = pyproject["project"]
    roots = declared([*project["dependencies"], *project["optional-dependencies"]["dev"]])  # type: ignore[index]
    assert not closure(roots) - locks["dev"].keys(), "missing from requirements/dev.txt: run `make lock`"


def test_native_dependencies_list_the_hashes_of_every_file_of_their_version() -> None:
    """A universal lock keeps every file's hash of a pin, not only this machine's wheel. The lock
    records hashes, not file names, so this cannot tell which platforms the wheels are for: that is
    `make lock`'s check below."""
    text = (REQUIREMENTS / "runtime.txt").read_text(encoding="utf-8")
    for package in ("pydantic-core", "orjson", "cryptography", "asyncpg", "uvloop"):
        entry = re.search(rf"^{package}==.*?(?=^\S)", text, flags=re.MULTILINE | re.DOTALL)
        assert entry is not None, package
        assert len(HASH.findall(entry.group(0))) > 2, package


def test_make_lock_fails_on_a_runtime_pin_without_wheels_for_x86_64_and_aarch64() -> None:
    """The check itself resolves against the index, which tests do not reach: its presence is what
    is tested; `make lock` runs it."""
    script = (ROOT / "scripts" / "lock.sh").read_text(encoding="utf-8")
    check = re.search(r"for platform in ([^;]+); do\n(.*?)\ndone", script, flags=re.DOTALL)
    assert check is not None
    assert check.group(1).split() == ["x86_64-manylinux_2_28", "aarch64-manylinux_2_28"]
    assert "--only-binary :all:" in check.group(2)
    assert '--python-platform "$platform"' in check.group(2)
    assert "runtime.txt" in check.group(2)
    assert "exit 1" in check.group(2)


def test_make_lock_shows_npm_errors() -> None:
    script = (ROOT / "scripts" / "lock.sh").read_text(encoding="utf-8")
    npm = next(line for line in script.splitlines() if "npm install" in line)
    assert "2>/dev/null" not in npm
    assert "--silent" not in npm


def make_dry_run(target: str) -> str:
    """The commands `make` would run for TARGET from scratch (-B), printed and not executed (-n)."""
    result = subprocess.run(
        ["make", "-n", "-B", target], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_make_run_installs_the_runtime_lock_only() -> None:
    commands = make_dry_run("run")
    assert "-r requirements/runtime.txt" in commands
    assert "requirements/dev.txt" not in commands


def test_make_checks_the_installed_closure_after_each_locked_install() -> None:
    """--no-deps installs exactly the lock: `pip check` fails the stamp when it misses a dependency."""
    for target in ("run", "unit"):
        lines = make_dry_run(target).splitlines()
        installs = [i for i, line in enumerate(lines) if "pip install" in line]
        checks = [i for i, line in enumerate(lines) if line.endswith("pip check")]
        assert checks, target
        assert max(checks) > max(installs), target


def test_make_installs_from_the_lock_with_hashes_and_no_resolution() -> None:
    commands = make_dry_run("unit")
    installs = [line for line in commands.splitlines() if "pip install" in line]
    assert any("-r requirements/dev.txt" in line for line in installs)
    for line in installs:
        assert "--no-deps" in line, line
        assert "--require-hashes" in line or "--no-build-isolation" in line, line


def test_every_npm_lock_pins_one_package_and_carries_the_integrity_of_its_whole_tree() -> None:
    """scripts/node.sh installs these with `npm ci`: exact versions, sha512 integrity, nothing resolved."""
    locks = sorted(path for path in NPM.iterdir() if path.is_dir())
    assert locks
    for lock in locks:
        manifest = json.loads((lock / "package.json").read_text(encoding="utf-8"))
        tree = json.loads((lock / "package-lock.json").read_text(encoding="utf-8"))
        ((name, version),) = manifest["dependencies"].items()
        assert re.fullmatch(r"[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.]+)?", version), f"{lock.name}: {version} is a range"
        assert tree["packages"][""]["dependencies"] == {name: version}, f"{lock.name}: run `make lock`"
        assert tree["packages"][f"node_modules/{name}"]["version"] == version
        for path, package in tree["packages"].items():
            if path and not package.get("link"):
                assert str(package.get("integrity", "")).startswith("sha512-"), f"{lock.name}: {path}"


def test_the_npm_versions_the_project_runs_are_locked() -> None:
    """Node 22 on both architectures, the conformance suite's default and alpha, the TypeScript client."""
    script = (ROOT / "scripts" / "conformance.sh").read_text(encoding="utf-8")
    default = re.search(r"CONFORMANCE_VERSION:-([^}]+)\}", script)
    assert default is not None
    wanted = {"node22-x64", "node22-arm64", f"tsclient-{TS_CLIENT_VERSION}", f"conformance-{default.group(1)}"}
    wanted.add(f"conformance-{CONFORMANCE_ALPHA}")
    assert wanted <= {path.name for path in NPM.iterdir() if (path / "package-lock.json").is_file()}


def test_the_openid_provider_the_auth_tests_run_is_locked() -> None:
    """tests/support/oidc.py installs oidc-provider through scripts/node.sh: from its lock, never resolved."""
    lock = NPM / f"oidc-provider-{OIDC_PROVIDER_VERSION}"
    manifest = json.loads((lock / "package.json").read_text(encoding="utf-8"))
    assert manifest["dependencies"] == {OIDC_PROVIDER_PACKAGE: OIDC_PROVIDER_VERSION}
    assert (lock / "package-lock.json").is_file()
