"""Safety patterns, compiled once and matched in time linear in the hint (docs/safety.md, "Limits").

A pattern is a glob (`*`, `?`, `[...]`, `[!...]`, as `fnmatch`), case-insensitive, that matches a
hint when it matches the whole hint or the hint from the start of any of its words. The naive way,
`fnmatch` from every word start, costs words x backtracking: a 4,000-character hint of one-letter
words against `*a*a*...b` held the event loop for seconds (issue 27, N1). Here a glob is split at its
stars into fixed-length segments, each a regular expression with no repetition, so no segment can
backtrack. A glob `P0*P1*...*Pk` matches from word start `s` exactly when `P0` matches at `s`, the
middle segments occur in order after it and `Pk` ends the hint. The leftmost occurrence of each
middle segment is always the best choice, and so is the first word start where `P0` matches (a later
start can only push every later segment further right), so one left-to-right pass decides it: a
search for the head, one search per middle segment, one anchored match for the tail.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

# A word starts at the hint's first character or after whitespace; `\s` in a str pattern is exactly
# `str.isspace`, which the loop used before.
WORD_START = r"(?:\A|(?<=\s))"


@dataclass(frozen=True, slots=True)
class Glob:
    """One compiled pattern. `head`, `middle` and `tail` are the star-separated segments."""

    source: str
    head: re.Pattern[str]
    middle: tuple[re.Pattern[str], ...]
    tail: re.Pattern[str] | None
    tail_length: int

    def matches(self, text: str) -> bool:
        """`text` must already be lower-case (the evaluator lowers the hint once for all patterns)."""
        if self.tail is None:
            # No star: the glob covers the rest of the hint from one start, which its length fixes.
            start = len(text) - self.tail_length
            # `fnmatch` from the hint's first character sees an empty rest too; from a later word, never.
            return (start == 0 or 0 < start < len(text)) and bool(self.head.match(text, start))
        found = self.head.search(text)
        if found is None:
            return False
        position = found.end()
        for segment in self.middle:
            later = segment.search(text, position)
            if later is None:
                return False
            position = later.end()
        start = len(text) - self.tail_length
        return position <= start and bool(self.tail.match(text, start))


@lru_cache(maxsize=4096)
def compile_glob(pattern: str) -> Glob:
    """Patterns repeat across steps and runs (the adapter's defaults, an agent's list): compile each once."""
    segments = _segments(pattern.lower())
    if len(segments) == 1:
        (only,) = segments
        fixed = re.compile(WORD_START + "".join(only) + r"\Z", re.DOTALL)
        return Glob(pattern, fixed, (), None, len(only))
    head, *middle, tail = segments
    return Glob(
        source=pattern,
        head=re.compile(WORD_START + "".join(head), re.DOTALL),
        middle=tuple(re.compile("".join(part), re.DOTALL) for part in middle if part),
        tail=re.compile("".join(tail) + r"\Z", re.DOTALL),
        tail_length=len(tail),
    )


def _segments(pattern: str) -> list[list[str]]:
    """The glob as star-separated runs of atoms, each atom one regular expression for one character."""
    segments: list[list[str]] = [[]]
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "*":
            if segments[-1] or len(segments) == 1:
                segments.append([])
            i += 1
        elif char == "?":
            segments[-1].append(".")
            i += 1
        elif char == "[" and (end := _bracket_end(pattern, i)) is not None:
            segments[-1].append(_character_class(pattern[i + 1 : end]))
            i = end + 1
        else:
            segments[-1].append(re.escape(char))
            i += 1
    return segments


def _bracket_end(pattern: str, opening: int) -> int | None:
    """Where `[...]` closes; a `]` right after `[` or `[!` belongs to the set. None: a literal `[`."""
    j = opening + 1
    if j < len(pattern) and pattern[j] == "!":
        j += 1
    if j < len(pattern) and pattern[j] == "]":
        j += 1
    end = pattern.find("]", j)
    return end if end >= 0 else None


def _character_class(body: str) -> str:
    """A bracket's body (`a-z_`, `!0-9`) as a regular-expression class of escaped members.

    An empty range (`z-a`) adds nothing, as in `fnmatch`; a set with no members matches nothing,
    a negated one any character."""
    negated = body.startswith("!")
    if negated:
        body = body[1:]
    members: list[str] = []
    i = 0
    while i < len(body):
        if i + 2 < len(body) and body[i + 1] == "-":
            low, high = body[i], body[i + 2]
            if low <= high:
                members.append(f"{_escaped(low)}-{_escaped(high)}")
            i += 3
        else:
            members.append(_escaped(body[i]))
            i += 1
    if not members:
        return "." if negated else "(?!)"
    return "[" + ("^" if negated else "") + "".join(members) + "]"


def _escaped(char: str) -> str:
    return char if char.isalnum() else "\\" + char
