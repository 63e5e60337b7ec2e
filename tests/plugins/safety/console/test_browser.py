"""The operator console in a real browser: headless Chromium (Debian's `chromium`) driven by Playwright
through the system browser's path, against a real `aql-mcp serve --dev` (docs/console.md, "Browser test").

An operator signs in on the development login page; an agent reports a denied action through real
MCP calls; the challenge appears on the open page without a reload (the event stream); the
operator reads its code off the page, types it with the keyboard and approves; the agent is then
told to continue. Screenshots are kept in `test-artifacts/` (AQL_MCP_TEST_ARTIFACTS overrides it).
Nothing is downloaded: `scripts/chromium.sh` installs the Debian package when the browser is missing.
Set AQL_MCP_TEST_SKIP_BROWSER=1 to skip this test explicitly; it is never skipped otherwise.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.aql import session
from tests.support.console import login_code, raise_challenge, step
from tests.support.redaction import remember_secret
from tests.support.server import ServerProcess, start_server

ROOT = Path(__file__).resolve().parents[4]
ARTIFACTS = Path(os.environ.get("AQL_MCP_TEST_ARTIFACTS", ROOT / "test-artifacts"))
LAUNCH_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TIMEOUT_MS = 15_000

pytestmark = pytest.mark.skipif(
    os.environ.get("AQL_MCP_TEST_SKIP_BROWSER") == "1", reason="AQL_MCP_TEST_SKIP_BROWSER=1 opts out"
)


@pytest.fixture(scope="module")
def chromium() -> str:
    """The installed browser: `make unit` installs it beforehand (`scripts/chromium.sh install`), since
    an installation would not fit in one test's time limit."""
    path = Path(os.environ.get("AQL_MCP_TEST_CHROMIUM", "/usr/bin/chromium"))
    assert path.exists(), f"{path} is missing: run `scripts/chromium.sh install` (or make test)"
    return str(path)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    env = {"AQL_MCP_CONSOLE__REFRESH_SECONDS": "0.3"}
    with start_server(tmp_path_factory.mktemp("console-browser"), env=env) as process:
        yield process


def test_an_operator_signs_in_reads_a_live_challenge_code_and_approves_it_in_chromium(
    chromium: str, server: ServerProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MCP-AQL §8.8.2: the code reaches the human through the console, and the human's code unblocks."""
    monkeypatch.setenv("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
    from playwright.sync_api import expect, sync_playwright

    # Assertions wait as long as actions do: a loaded machine may take seconds to show a change.
    expect.set_options(timeout=TIMEOUT_MS)

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright, session(server, subject="agent-browser") as agent:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path / "profile"),
            executable_path=chromium,
            headless=True,
            args=LAUNCH_ARGS,
            viewport={"width": 1366, "height": 768},
        )
        try:
            page = context.new_page()
            page.set_default_timeout(TIMEOUT_MS)
            problems: list[str] = []
            page.on("console", lambda message: problems.append(message.text) if message.type == "error" else None)
            page.on("pageerror", lambda error: problems.append(str(error)))

            page.goto(f"{server.base}/console")
            expect(page).to_have_url(f"{server.base}/console/login")
            page.get_by_label("Operator name").fill("olivia")
            page.get_by_label("Sign-in code").fill(login_code(server))
            page.get_by_role("button", name="Sign in").click()
            expect(page.get_by_role("heading", name="Operator console")).to_be_visible()
            cookie = next(c for c in context.cookies() if c["name"] == "aql_console")
            remember_secret(cookie["value"])
            assert (cookie["httpOnly"], cookie["sameSite"], cookie["path"]) == (True, "Strict", "/console")
            expect(page.locator("#stream-state")).to_contain_text("Live")

            challenge = raise_challenge(agent)
            shown = page.locator(f'code[data-challenge="{challenge}"]')
            expect(shown).to_be_visible()  # arrived through the event stream: the page was not reloaded
            code = remember_secret(shown.inner_text().strip())
            page.screenshot(path=str(ARTIFACTS / "console.png"), full_page=True)
            unlabelled = page.evaluate(
                "Array.from(document.querySelectorAll('input:not([type=hidden])')).filter(i => !i.labels.length).length"
            )
            assert unlabelled == 0

            field = page.get_by_label(f"Code for challenge {challenge[:8]}")
            field.focus()
            page.keyboard.type(code)
            page.keyboard.press("Enter")
            expect(page.get_by_role("status").filter(has_text="Verified")).to_be_visible()
            expect(page.locator(f'code[data-challenge="{challenge}"]')).to_have_count(0)
            page.screenshot(path=str(ARTIFACTS / "console-approved.png"), full_page=True)
            assert problems == []
        finally:
            context.close()
        directive = step(agent)
    assert directive["continue"] is True
    assert "stopped" not in directive
    assert (ARTIFACTS / "console.png").stat().st_size > 0
