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
describing its action in a sentence would otherwise slip past (docs/safety.md). `plugins/safety/glob.py`
matches them in time linear in the hint; an evaluation that still outruns its budget pauses
("Evaluation budget exceeded"): a human looks at what the loop could not judge in time.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from aql_mcp.plugins.safety.glob import compile_glob

Decision = Literal["continue", "pause", "verify", "block"]
SafetyTier = Literal["advisory", "confirm", "verify", "danger_zone"]
Tolerance = Literal["conservative", "moderate", "aggressive"]

THRESHOLDS: Mapping[Tolerance, int] = {"conservative": 25, "moderate": 50, "aggressive": 75}
TOLERANCES: tuple[Tolerance, ...] = ("conservative", "moderate", "aggressive")  # tightest first
STEP_LIMIT = "Step limit exceeded"
OVER_BUDGET = "Evaluation budget exceeded"


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


class OverBudget(Exception):
    """The evaluation ran past its deadline; `evaluate` answers it with a pause."""


@dataclass(frozen=True, slots=True)
class Deadline:
    """When an evaluation must stop matching (`time.monotonic`); checked before every pattern."""

    at: float = float("inf")

    @classmethod
    def after(cls, seconds: float) -> Deadline:
        return cls(time.monotonic() + seconds)

    def check(self) -> None:
        if time.monotonic() > self.at:
            raise OverBudget


def evaluate(
    policy: Policy, *, steps: int, outcome: str | None, action: str, deadline: Deadline = Deadline()
) -> Verdict:
    """The pipeline for one reported step (`steps` counts it)."""
    text = action.lower()
    try:
        return (
            step_limit(policy, steps)
            or previous_outcome(outcome)
            or patterns(policy, text, deadline)
            or risk(policy, text, steps, deadline)
        )
    except OverBudget:
        factors = ("The action could not be evaluated within the safety loop's time budget",)
        return Verdict("pause", factors, "budget", OVER_BUDGET, "confirm")


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


def patterns(policy: Policy, action: str, deadline: Deadline = Deadline()) -> Verdict | None:
    if (pattern := first_match(policy.deny, action, deadline)) is not None:
        reason = f"Action matches deny pattern '{pattern}'"
        return Verdict("block", (f"Pattern match: {pattern} is denied",), "patterns", reason, "danger_zone", 100)
    if (pattern := first_match(policy.requires_approval, action, deadline)) is not None:
        reason = f"Action requires approval: matches '{pattern}'"
        return Verdict("pause", (f"Pattern match: {pattern} requires approval",), "patterns", reason, "confirm")
    if (pattern := first_match(policy.auto_approve, action, deadline)) is not None:
        return Verdict("continue", (f"Pattern match: {pattern} is auto-approved",), "patterns", None, "advisory")
    return None


def risk(policy: Policy, action: str, steps: int, deadline: Deadline = Deadline()) -> Verdict:
    score, rule = score_of(policy, action, deadline)
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


def score_of(policy: Policy, action: str, deadline: Deadline = Deadline()) -> tuple[int, str]:
    scores = [(score, pattern) for pattern, score in policy.risk_rules.items() if _within(deadline, pattern, action)]
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


def first_match(globs: Iterable[str], action: str, deadline: Deadline = Deadline()) -> str | None:
    """The first glob that matches `action` (already lower-case)."""
    return next((glob for glob in globs if _within(deadline, glob, action)), None)


def matches(glob: str, action: str) -> bool:
    """Whether `glob` matches `action`, in any case (docs/safety.md)."""
    return compile_glob(glob).matches(action.lower())


def _within(deadline: Deadline, glob: str, text: str) -> bool:
    deadline.check()
    return compile_glob(glob).matches(text)


def tighter(configured: Tolerance, asked: str | None) -> Tolerance:
    """An agent may ask for a more cautious tolerance, never a looser one (§8.7.4, docs/safety.md)."""
    if asked not in TOLERANCES:
        return configured
    return min(configured, asked, key=TOLERANCES.index)
