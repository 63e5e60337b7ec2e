"""The container image's Dockerfile: hadolint, and the properties a platform team relies on.

Building and running the image needs a container engine (`make image-test`, scripts/image-test.sh);
these checks read the Dockerfile and exercise its entrypoint and healthcheck against the real CLI
and a real server.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from aql_mcp.main import parser
from tests.support.server import ServerProcess

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
# The documented pattern for layering a plugin into the image (docs/plugins.md, "Installing a plugin").
PLUGIN_DOCKERFILE = ROOT / "examples" / "greeter-plugin" / "Dockerfile"
STATE_PATH = "/var/lib/aql-mcp"


@dataclass
class Stage:
    base: str
    name: str
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def all(self, keyword: str) -> list[str]:
        return [arguments for instruction, arguments in self.instructions if instruction == keyword]

    def last(self, keyword: str) -> str:
        found = self.all(keyword)
        assert found, f"no {keyword} in stage {self.name}"
        return found[-1]


def parse(text: str) -> tuple[dict[str, str], list[Stage]]:
    """Global ARGs (name -> default) and the stages, continuation lines joined, comments dropped."""
    logical = re.sub(r"\\\n", " ", "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#")))
    global_args: dict[str, str] = {}
    stages: list[Stage] = []
    for line in filter(None, (line.strip() for line in logical.splitlines())):
        instruction, _, arguments = line.partition(" ")
        instruction, arguments = instruction.upper(), arguments.strip()
        if instruction == "FROM":
            words = arguments.split()
            stages.append(Stage(base=words[0], name=words[2] if len(words) > 2 else str(len(stages))))
        elif stages:
            stages[-1].instructions.append((instruction, arguments))
        elif instruction == "ARG":
            name, _, default = arguments.partition("=")
            global_args[name] = default
    return global_args, stages


@pytest.fixture(scope="module")
def dockerfile() -> tuple[dict[str, str], list[Stage]]:
    return parse(DOCKERFILE.read_text(encoding="utf-8"))


def final(dockerfile: tuple[dict[str, str], list[Stage]]) -> Stage:
    return dockerfile[1][-1]


def exec_form(arguments: str) -> list[str]:
    value = json.loads(arguments)
    assert isinstance(value, list), f"not exec form: {arguments}"
    assert all(isinstance(item, str) for item in value)
    return value


def labels(stage: Stage) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for arguments in stage.all("LABEL"):
        for token in shlex.split(arguments):
            key, _, value = token.partition("=")
            pairs[key] = value
    return pairs


@pytest.mark.parametrize("path", [DOCKERFILE, PLUGIN_DOCKERFILE], ids=["service", "plugin"])
def test_hadolint_passes(deploy_tools: dict[str, Path], path: Path) -> None:
    command = [str(deploy_tools["hadolint"]), "--no-color", "--failure-threshold", "style", str(path)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


def test_build_is_multi_stage_on_a_python_311_slim_base_given_as_build_argument(
    dockerfile: tuple[dict[str, str], list[Stage]],
) -> None:
    global_args, stages = dockerfile
    assert global_args["PYTHON_IMAGE"] == "python:3.11-slim"
    assert len(stages) >= 2
    assert {stage.base for stage in stages} == {"${PYTHON_IMAGE}"}
    assert any("pip wheel" in run for stage in stages[:-1] for run in stage.all("RUN"))


def test_final_stage_carries_only_the_installed_environment(dockerfile: tuple[dict[str, str], list[Stage]]) -> None:
    """No compiler, pip cache, source tree or test: nothing is built or installed in the last stage."""
    stage = final(dockerfile)
    for copy in stage.all("COPY"):
        assert copy.startswith("--from="), f"the final stage copies from the build context: {copy}"
    for run in stage.all("RUN"):
        assert not re.search(r"\b(pip|apt-get|apt|gcc|make)\b", run), run
    assert any("PIP_NO_CACHE_DIR=1" in env for s in dockerfile[1][:-1] for env in s.all("ENV"))


def test_runs_as_a_numeric_non_root_user(dockerfile: tuple[dict[str, str], list[Stage]]) -> None:
    user = final(dockerfile).last("USER")
    assert re.fullmatch(r"[0-9]+(:[0-9]+)?", user), user
    assert int(user.split(":")[0]) >= 1000


def test_state_lives_on_a_volume_for_a_read_only_root_filesystem(
    dockerfile: tuple[dict[str, str], list[Stage]],
) -> None:
    stage = final(dockerfile)
    assert exec_form(stage.last("VOLUME")) == [STATE_PATH]
    assert any(f"AQL_MCP_STORE__PATH={STATE_PATH}" in env for env in stage.all("ENV"))
    assert any("PYTHONDONTWRITEBYTECODE=1" in env for env in stage.all("ENV"))
    assert any(f"chown 10001:10001 {STATE_PATH}" in run for run in stage.all("RUN"))


def test_exposes_the_service_port_and_stops_on_sigterm(dockerfile: tuple[dict[str, str], list[Stage]]) -> None:
    stage = final(dockerfile)
    assert stage.last("EXPOSE") == "8000"
    assert stage.last("STOPSIGNAL") == "SIGTERM"


def test_entrypoint_is_exec_form_serving_on_all_interfaces(dockerfile: tuple[dict[str, str], list[Stage]]) -> None:
    entrypoint = exec_form(final(dockerfile).last("ENTRYPOINT"))
    assert entrypoint[:2] == ["aql-mcp", "serve"]
    # The CLI takes it, with the chart's arguments appended (helm/aql-mcp: args --config FILE).
    args = parser().parse_args([*entrypoint[1:], "--config", "/etc/aql-mcp/config.yaml"])
    assert args.host == "0.0.0.0"
    assert args.config == Path("/etc/aql-mcp/config.yaml")
    assert not args.dev


def test_oci_labels_name_version_and_source(dockerfile: tuple[dict[str, str], list[Stage]]) -> None:
    stage = final(dockerfile)
    found = labels(stage)
    assert found["org.opencontainers.image.title"] == "aql-mcp"
    assert found["org.opencontainers.image.version"] == "${VERSION}"
    assert found["org.opencontainers.image.source"] == "${SOURCE}"
    build_args = dict(arg.partition("=")[::2] for arg in stage.all("ARG"))
    assert {"VERSION", "SOURCE"} <= build_args.keys()
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert f'version = "{build_args["VERSION"]}"' in pyproject


def healthcheck_command(stage: Stage) -> list[str]:
    arguments = stage.last("HEALTHCHECK")
    options, _, command = arguments.partition("CMD ")
    assert "--interval=" in options
    assert "--timeout=" in options
    return exec_form(command)


def test_healthcheck_asks_health_with_python(dockerfile: tuple[dict[str, str], list[Stage]]) -> None:
    command = healthcheck_command(final(dockerfile))
    assert command[:2] == ["python", "-c"]  # a slim image has no curl
    assert "/health" in command[2]


def test_healthcheck_passes_against_a_running_server_and_fails_without_one(
    dockerfile: tuple[dict[str, str], list[Stage]], server: ServerProcess
) -> None:
    code = healthcheck_command(final(dockerfile))[2]
    for port, expected in ((server.port, 0), (1, 1)):
        env = {"AQL_MCP_SERVER__PORT": str(port), "PATH": "/usr/bin:/bin"}
        result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, timeout=30, check=False)
        assert result.returncode == expected, result.stderr


def test_healthcheck_asks_the_probes_listener_when_one_is_configured(
    dockerfile: tuple[dict[str, str], list[Stage]], server: ServerProcess
) -> None:
    """Issue 27 (N3): a flood of the service port must not fail the container's health check either."""
    code = healthcheck_command(final(dockerfile))[2]
    env = {"AQL_MCP_SERVER__PORT": "1", "AQL_MCP_PROBES__PORT": str(server.port), "PATH": "/usr/bin:/bin"}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, timeout=30, check=False)
    assert result.returncode == 0, result.stderr


def test_dockerignore_sends_only_the_package_and_its_runtime_lock_to_the_build() -> None:
    lines = [line.strip() for line in (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines() if line.strip()]
    patterns = [line for line in lines if not line.startswith("#")]
    assert patterns[0] == "*"
    sent = {line[1:].rstrip("/") for line in patterns if line.startswith("!")}
    assert sent == {"pyproject.toml", "README.md", "src", "requirements/build.txt", "requirements/runtime.txt"}


def test_build_installs_from_the_hashed_lock_and_resolves_nothing(
    dockerfile: tuple[dict[str, str], list[Stage]],
) -> None:
    """Every pip step before the last stage takes the lock's files by hash (requirements/, `make lock`),
    the project's own wheel is built by the locked backend, and the install stage reads no index."""
    runs = [run for stage in dockerfile[1][:-1] for run in stage.all("RUN")]
    steps = [step for run in runs for step in run.split("&&") if re.search(r"pip (install|wheel)", step)]
    assert any("-r requirements/runtime.txt" in step and "pip wheel" in step for step in steps)
    assert any("-r requirements/build.txt" in step for step in steps)
    for step in steps:
        assert "--no-deps" in step, step
        if "-r " in step:
            assert "--require-hashes" in step, step
        else:  # the service's own wheel: built or installed without pulling anything
            assert "--no-build-isolation" in step or "--no-index" in step, step
    install = dockerfile[1][-2]
    assert all("--no-index" in step for run in install.all("RUN") for step in run.split("&&") if "pip install" in step)


def test_the_install_stage_checks_the_installed_closure_before_removing_pip(
    dockerfile: tuple[dict[str, str], list[Stage]],
) -> None:
    """--no-deps installs only what the lock lists: `pip check` fails the build when it misses one."""
    steps = [step.strip() for run in dockerfile[1][-2].all("RUN") for step in run.split("&&")]
    check = next(i for i, step in enumerate(steps) if step.endswith("pip check"))
    assert check > max(i for i, step in enumerate(steps) if "pip install" in step)
    assert check < next(i for i, step in enumerate(steps) if "pip uninstall" in step)


def test_the_plugin_layer_adds_files_to_the_service_environment_and_runs_nothing_there(
    dockerfile: tuple[dict[str, str], list[Stage]],
) -> None:
    """The service image has no pip: the plugin is installed in a build stage on the service's own
    base, and the last stage only copies it into the service's site-packages (issue 15)."""
    global_args, stages = parse(PLUGIN_DOCKERFILE.read_text(encoding="utf-8"))
    assert global_args["PYTHON_IMAGE"] == dockerfile[0]["PYTHON_IMAGE"]
    assert [stage.base for stage in stages] == ["${PYTHON_IMAGE}", "${AQL_MCP_IMAGE}"]
    build, layer = stages
    assert any("--require-hashes" in run for run in build.all("RUN"))  # the build backend, pinned
    assert any("pip install --no-deps --no-index --target /plugin" in run for run in build.all("RUN"))
    assert [instruction for instruction, _ in layer.instructions] == ["COPY"]
    venv = final(dockerfile).last("COPY").split()[-1]  # where the service's environment lives
    assert layer.last("COPY").split()[-2:] == ["/plugin", f"{venv}/lib/python3.11/site-packages/"]


def instructions_only(text: str) -> list[str]:
    return [line.rstrip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def test_the_documented_plugin_dockerfile_is_the_examples() -> None:
    """docs/plugins.md shows the pattern `make image-test` builds, not an older one."""
    docs = (ROOT / "docs" / "plugins.md").read_text(encoding="utf-8")
    [snippet] = re.findall(r"```dockerfile\n(.*?)```", docs, flags=re.DOTALL)
    assert instructions_only(snippet) == instructions_only(PLUGIN_DOCKERFILE.read_text(encoding="utf-8"))
