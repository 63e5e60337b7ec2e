"""The autonomy evaluation pipeline (MCP-AQL §8.7.2): pure, one function per stage, in order.

1. Step limit: more steps than `maxAutonomousSteps` pauses ("Step limit exceeded").
2. Previous outcome: `outcome == "failure"` pauses.
3. Patterns on `nextActionHint`: `deny` blocks (out-of-band verification), `requiresApproval`
   pauses, `autoApprove` continues without the risk stages; `deny` > `requiresApproval` >
   `autoApprove`.
4. Risk tier: the highest score among the matching risk rules (else the default score) maps to
   advisory (0-30), confirm (31-60), verify (61-85, a paused run and a challenge) or danger_zone
   (86-100, a hard block and a challenge).
5. Risk tolerance: a score above the tolerance's threshold (conservative 25, moderate 50,
   aggressive 75) pauses for a human; below it the action continues.

The first stage that stops the action ends the evaluation. Patterns are globs (`*`, `?`, `[...]`,
as `fnmatch`), case-insensitive, matched against the whole hint or against the hint from the start
of any of its words: "rm -rf*" catches "executing shell command: rm -rf /tmp/x", which an agent
describing its action in a sentence would otherwise slip past (docs/safety.md).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

Decision = Literal["continue", "pause", "verify", "block"]
SafetyTier = Literal["advisory", "confirm", "verify", "danger_zone"]
Tolerance = Literal["conservative", "moderate", "aggressive"]

THRESHOLDS: Mapping[Tolerance, int] = {"conservative": 25, "moderate": 50, "aggressive": 75}
TOLERANCES: tuple[Tolerance, ...] = ("conservative", "moderate", "aggressive")  # tightest first
STEP_LIMIT = "Step limit exceeded"


@dataclass(frozen=True, slots=True)
class Policy:
    """What one run is evaluated against: the adapter's settings, tightened by the agent's."""

    max_steps: int
    tolerance: Tolerance
    deny: tuple[str, ...]
    requires_approval: tuple[str, ...]
    auto_approve: tuple[str, ...]
    risk_rules: Mapping[str, int]
    default_risk: int


@dataclass(frozen=True, slots=True)
class Verdict:
    decision: Decision
    factors: tuple[str, ...]
    stage: str
    reason: str | None = None
    tier: SafetyTier | None = None
    score: int | None = None


def evaluate(policy: Policy, *, steps: int, outcome: str | None, action: str) -> Verdict:
    """The pipeline for one reported step (`steps` counts it)."""
    return (
        step_limit(policy, steps)
        or previous_outcome(outcome)
        or patterns(policy, action)
        or risk(policy, action, steps)
    )


def step_limit(policy: Policy, steps: int) -> Verdict | None:
    if steps > policy.max_steps:
        return Verdict(
            "pause", (f"Step {steps} exceeds maxAutonomousSteps {policy.max_steps}",), "step_limit", STEP_LIMIT
        )
    return None


def previous_outcome(outcome: str | None) -> Verdict | None:
    if outcome == "failure":
        return Verdict("pause", ("The previous step reported failure",), "previous_outcome", "Previous step failed")
    return None


def patterns(policy: Policy, action: str) -> Verdict | None:
    if (pattern := first_match(policy.deny, action)) is not None:
        reason = f"Action matches deny pattern '{pattern}'"
        return Verdict("block", (f"Pattern match: {pattern} is denied",), "patterns", reason, "danger_zone", 100)
    if (pattern := first_match(policy.requires_approval, action)) is not None:
        reason = f"Action requires approval: matches '{pattern}'"
        return Verdict("pause", (f"Pattern match: {pattern} requires approval",), "patterns", reason, "confirm")
    if (pattern := first_match(policy.auto_approve, action)) is not None:
        return Verdict("continue", (f"Pattern match: {pattern} is auto-approved",), "patterns", None, "advisory")
    return None


def risk(policy: Policy, action: str, steps: int) -> Verdict:
    score, rule = score_of(policy, action)
    tier = tier_of(score)
    factors = (f"Risk score {score} ({rule})", f"Safety tier {tier}")
    if tier == "danger_zone":
        return Verdict("block", factors, "risk_tier", f"Danger zone: risk score {score}", tier, score)
    if tier == "verify":
        return Verdict("verify", factors, "risk_tier", f"Out-of-band verification required: risk {score}", tier, score)
    threshold = THRESHOLDS[policy.tolerance]
    if score > threshold:
        reason = f"Risk score {score} above the {policy.tolerance} tolerance ({threshold})"
        return Verdict("pause", (*factors, reason), "risk_tolerance", reason, tier, score)
    within = f"Within {policy.tolerance} tolerance ({threshold}); {policy.max_steps - steps} steps remaining"
    return Verdict("continue", (*factors, within), "risk_tolerance", None, tier, score)


def score_of(policy: Policy, action: str) -> tuple[int, str]:
    scores = [(score, pattern) for pattern, score in policy.risk_rules.items() if matches(pattern, action)]
    if not scores:
        return policy.default_risk, "no risk rule matched"
    score, pattern = max(scores)
    return score, f"rule {pattern}"


def tier_of(score: int) -> SafetyTier:
    if score <= 30:
        return "advisory"
    if score <= 60:
        return "confirm"
    if score <= 85:
        return "verify"
    return "danger_zone"


def first_match(globs: Iterable[str], action: str) -> str | None:
    return next((glob for glob in globs if matches(glob, action)), None)


def matches(glob: str, action: str) -> bool:
    text, pattern = action.lower(), glob.lower()
    starts = [0] + [i + 1 for i, char in enumerate(text) if char.isspace() and i + 1 < len(text)]
    return any(fnmatch.fnmatchcase(text[start:], pattern) for start in starts)


def tighter(configured: Tolerance, asked: str | None) -> Tolerance:
    """An agent may ask for a more cautious tolerance, never a looser one (§8.7.4, docs/safety.md)."""
    if asked not in TOLERANCES:
        return configured
    return min(configured, asked, key=TOLERANCES.index)
