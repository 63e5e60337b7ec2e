"""The console's live region (docs/console.md, "The page"): escaped, labelled, deterministic."""

from __future__ import annotations

import re

from aql_mcp.plugins.safety.console.tables import live_region
from aql_mcp.plugins.safety.store import AgentRun, Approval, Block, Challenge, SafetyEvent, SafetyOverview
from aql_mcp.store.principals import Identity

HOSTILE = '<script>alert("x")</script>'


def overview() -> SafetyOverview:
    challenge = Challenge(
        "c-1", HOSTILE, "run-1", "p-agent", "deny", HOSTILE, HOSTILE, "CODE&<>", "pending", 1.0, 301.0
    )
    approval = Approval("a-1", "agent", "run-1", "p-agent", "autonomy_pause", HOSTILE, "risk", "pending", 1.0)
    run = AgentRun("run-1", "agent", "p-agent", None, "blocked", 3, 1.0, 2.0, last_action=HOSTILE)
    block = Block("agent", "c-1", HOSTILE, 1.0, principal="p-agent")
    event = SafetyEvent(1, 1.0, "agent", "challenge_raised", "p-agent", {"note": HOSTILE})
    return SafetyOverview([run], [approval], [challenge], [block], [event])


def test_every_value_from_the_store_is_escaped() -> None:
    html = live_region(overview(), "csrf-token")
    assert "<script" not in html
    assert "&lt;script&gt;" in html
    assert 'data-challenge="c-1">CODE&amp;&lt;&gt;</code>' in html


def test_every_text_input_has_a_label_and_every_form_its_csrf_token() -> None:
    html = live_region(overview(), "csrf-token")
    inputs = re.findall(r"<input type=text id=\"([^\"]+)\"", html)
    assert inputs == ["code-c-1"]
    assert '<label for="code-c-1">' in html
    forms = html.count("<form ")
    assert forms == 5  # verify, reject, approve, deny, lift
    assert html.count('name="csrf" value="csrf-token"') == forms


def test_tables_have_column_headers_and_sections_have_headings() -> None:
    html = live_region(overview(), "t")
    assert html.count("<table>") == 5
    assert html.count("<th scope=col>") >= 30
    for key in ("challenges", "approvals", "blocks", "runs", "events"):
        assert f'<section id="{key}" aria-labelledby="{key}-heading"><h2 id="{key}-heading">' in html


def test_the_same_overview_renders_the_same_html_so_an_unchanged_store_sends_no_update() -> None:
    assert live_region(overview(), "t") == live_region(overview(), "t")


def test_empty_sections_say_so() -> None:
    html = live_region(SafetyOverview([], [], [], [], []), "t")
    assert html.count("None.") == 5
    assert "<table>" not in html


def test_each_decision_row_shows_the_principal_beside_the_agents_own_name() -> None:
    """issue 27, N8: an agent names itself; its principal's subject and tenant tell two apart."""
    view = overview()
    view.identities = {"p-agent": Identity("p-agent", HOSTILE, "acme")}
    html = live_region(view, "t")
    rows = re.findall(r"<tr><td>.*?</tr>", html)
    decided = [row for row in rows if "<form" in row or "run-1</code>" in row]
    assert len(decided) == 4  # the challenge, the approval, the block, the run
    for row in decided:
        assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;</span> <span class=muted>tenant acme</span>" in row
        assert "<code>p-agent</code>" in row
    assert "<script" not in html


def test_a_principal_nobody_named_shows_its_key_only() -> None:
    html = live_region(overview(), "t")
    assert "tenant" not in html
    assert "<td><code>p-agent</code></td>" in html
