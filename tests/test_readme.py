"""The README's quick start works as printed: its curl call and its Python SDK example, run against a
real server with only the address changed, succeed on the first try."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from tests.support.redaction import WIRE_LEAKS
from tests.support.server import ServerProcess

README = Path(__file__).resolve().parents[1] / "README.md"
QUICK_START_URL = "http://127.0.0.1:8000"
DEADLINE = 60


def _quick_start() -> str:
    text = README.read_text(encoding="utf-8")
    return text[text.index("## Quick start") : text.index("\n## ", text.index("## Quick start") + 1)]


def _block(language: str, containing: str) -> str:
    blocks = re.findall(rf"```{language}\n(.*?)```", _quick_start(), flags=re.DOTALL)
    matching = [block for block in blocks if containing in block]
    assert len(matching) == 1, f"one {language} block with {containing!r} in the quick start"
    return matching[0]


def _run(command: list[str], server: ServerProcess) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MCP_TOKEN": server.token()}
    return subprocess.run(command, capture_output=True, text=True, timeout=DEADLINE, env=env, check=False)


def test_the_quick_start_curl_call_introspects_the_operations(server: ServerProcess) -> None:
    command = _block("sh", "curl").replace(QUICK_START_URL, server.base)
    done = _run(["bash", "-c", command], server)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)["result"]
    envelope = json.loads(result["content"][0]["text"])
    assert envelope["success"] is True
    assert envelope["data"]["operations"]


def test_the_quick_start_python_example_uses_the_public_sdk_and_calls_a_tool(server: ServerProcess) -> None:
    code = _block("python", "from mcp import Client")
    assert "._" not in code, "public SDK names only"
    done = _run([sys.executable, "-c", code.replace(QUICK_START_URL, server.base)], server)
    assert done.returncode == 0, done.stderr
    first, rest = done.stdout.split("\n", 1)
    assert "mcp_aql_read" in first
    assert json.loads(rest)["success"] is True


def _section(title: str) -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index(f"## {title}")
    return text[start : text.index("\n## ", start + 1)]


def test_the_writing_a_plugin_examples_run_as_printed_under_pytest(tmp_path: Path) -> None:
    """The operation, the typed tool and the test of "Writing a plugin", put in files as a plugin
    author would, pass under pytest with the public API only."""
    blocks = re.findall(r"```python\n(.*?)```", _section("Writing a plugin"), flags=re.DOTALL)
    operation, tool, test = blocks
    (tmp_path / "readme_plugin.py").write_text(operation + "\n\n" + tool, encoding="utf-8")
    extra = (
        "\n\n@pytest.mark.anyio\n"
        "async def test_shout() -> None:\n"
        "    async with plugin_client(Shouter()) as client:\n"
        "        result = await client.call_tool('shout', {'words': 'hi', 'times': 2})\n"
        "    assert result['content'][0]['text'] == 'HI HI'\n"
    )
    header = "from readme_plugin import Greeter, Shouter\n"
    (tmp_path / "test_readme_plugin.py").write_text(header + test + extra, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=DEADLINE * 3,
        env=env,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "2 passed" in done.stdout


def test_the_readme_served_as_a_resource_carries_no_marker_of_a_leak() -> None:
    """`doc://readme` is read in the fuzz run like any answer: a path into site-packages or a
    `sqlite3.` call in an example would read as a leaked trace there (corporate §13.3)."""
    text = README.read_text(encoding="utf-8")
    assert [marker for marker in WIRE_LEAKS if marker in text] == []
