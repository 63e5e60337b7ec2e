"""The autonomy evaluation pipeline, stage by stage (MCP-AQL §8.7.2)."""

from __future__ import annotations

from aql_mcp.plugins.safety.evaluator import OVER_BUDGET, Deadline, Policy, evaluate, matches, tier_of, tighter

POLICY = Policy(
    max_steps=3,
    tolerance="moderate",
    deny=("drop_*", "rm -rf*"),
    requires_approval=("delete_*", "*force*"),
    auto_approve=("read_*", "delete_temp*"),
    risk_rules={"*write*": 40, "*deploy*": 55, "*password*": 70, "*sudo *": 90},
    default_risk=10,
)


def test_stage_1_more_steps_than_the_limit_pauses_whatever_the_action_8_7_2() -> None:
    verdict = evaluate(POLICY, steps=4, outcome=None, action="read_file a")
    assert (verdict.decision, verdict.reason, verdict.stage) == ("pause", "Step limit exceeded", "step_limit")
    assert evaluate(POLICY, steps=3, outcome=None, action="read_file a").decision == "continue"


def test_stage_2_a_failed_previous_step_pauses_and_an_omitted_outcome_is_skipped_8_7_2() -> None:
    assert evaluate(POLICY, steps=1, outcome="failure", action="read_file a").stage == "previous_outcome"
    assert evaluate(POLICY, steps=1, outcome="success", action="read_file a").decision == "continue"
    assert evaluate(POLICY, steps=1, outcome=None, action="read_file a").decision == "continue"


def test_stage_3_deny_wins_over_requires_approval_which_wins_over_auto_approve_8_7_2() -> None:
    denied = evaluate(POLICY, steps=1, outcome=None, action="drop_table users")
    assert (denied.decision, denied.tier) == ("block", "danger_zone")
    held = evaluate(POLICY, steps=1, outcome=None, action="delete_temp files with force")
    assert (held.decision, held.tier) == ("pause", "confirm")
    assert evaluate(POLICY, steps=1, outcome=None, action="read_file /etc/password").decision == "continue"


def test_stage_4_risk_scores_map_to_the_four_tiers_8_7_2() -> None:
    assert [tier_of(s) for s in (0, 30, 31, 60, 61, 85, 86, 100)] == [
        "advisory",
        "advisory",
        "confirm",
        "confirm",
        "verify",
        "verify",
        "danger_zone",
        "danger_zone",
    ]
    verify = evaluate(POLICY, steps=1, outcome=None, action="update password of admin")
    assert (verify.decision, verify.tier, verify.score) == ("verify", "verify", 70)
    danger = evaluate(POLICY, steps=1, outcome=None, action="run sudo reboot")
    assert (danger.decision, danger.tier) == ("block", "danger_zone")


def test_stage_5_the_tolerance_decides_within_the_confirm_tier_8_7_2() -> None:
    moderate = evaluate(POLICY, steps=1, outcome=None, action="write notes.txt")
    assert (moderate.decision, moderate.score) == ("continue", 40)
    assert evaluate(POLICY, steps=1, outcome=None, action="deploy the docs").decision == "pause"
    strict = Policy(POLICY.max_steps, "conservative", (), (), (), POLICY.risk_rules, POLICY.default_risk)
    assert evaluate(strict, steps=1, outcome=None, action="write notes.txt").decision == "pause"
    loose = Policy(POLICY.max_steps, "aggressive", (), (), (), POLICY.risk_rules, POLICY.default_risk)
    assert evaluate(loose, steps=1, outcome=None, action="deploy the docs").decision == "continue"


def test_every_verdict_carries_factors_8_7_1() -> None:
    for action in ("drop_x", "delete_x", "read_x", "write x", "nothing special"):
        assert evaluate(POLICY, steps=1, outcome=None, action=action).factors


def test_patterns_are_case_insensitive_globs_anchored_at_a_word() -> None:
    assert matches("rm -rf*", "executing shell command: RM -rf /tmp/x")
    assert matches("drop_*", "drop_table users")
    assert not matches("drop_*", "backdrop_paint")
    assert matches("*force*", "git push --force")
    assert matches("get_?", "get_a")


def test_an_agent_can_tighten_its_tolerance_but_not_loosen_it_8_7_4() -> None:
    assert tighter("moderate", "conservative") == "conservative"
    assert tighter("moderate", "aggressive") == "moderate"
    assert tighter("moderate", None) == "moderate"
    assert tighter("moderate", "reckless") == "moderate"


def test_an_evaluation_past_its_deadline_pauses_for_a_human_issue_27() -> None:
    """A step the loop could not judge in time is held for an operator, never let through."""
    verdict = evaluate(POLICY, steps=1, outcome=None, action="read_file a", deadline=Deadline(0.0))
    assert (verdict.decision, verdict.stage, verdict.reason) == ("pause", "budget", OVER_BUDGET)
    assert verdict.factors
    assert evaluate(POLICY, steps=4, outcome=None, action="x", deadline=Deadline(0.0)).stage == "step_limit"
