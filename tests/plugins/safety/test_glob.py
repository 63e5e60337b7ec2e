"""Safety globs: the same answers as `fnmatch` from every word start, without its cost (issue 27, N1)."""

from __future__ import annotations

import fnmatch

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from aql_mcp.plugins.safety.glob import compile_glob

ALPHABET = "ab _-!]["
PATTERN_ALPHABET = ALPHABET + "*?"


def reference(glob: str, text: str) -> bool:
    """What the loop did before: `fnmatch` from the hint's start and from the start of every word."""
    text, glob = text.lower(), glob.lower()
    starts = [0] + [i + 1 for i, char in enumerate(text) if char.isspace() and i + 1 < len(text)]
    return any(fnmatch.fnmatchcase(text[start:], glob) for start in starts)


def has_empty_range(glob: str) -> bool:
    """`x-y` with x after y: `fnmatch` and this module differ there on purpose (see below)."""
    return any(glob[i + 1] == "-" and glob[i] > glob[i + 2] for i in range(len(glob) - 2))


def matches(glob: str, text: str) -> bool:
    return compile_glob(glob).matches(text.lower())


@settings(max_examples=3000, deadline=None)
@given(st.text(PATTERN_ALPHABET, max_size=10), st.text(ALPHABET + "\t", max_size=14))
def test_a_glob_answers_as_fnmatch_from_every_word_start(glob: str, text: str) -> None:
    assume(not has_empty_range(glob))
    assert matches(glob, text) == reference(glob, text)


@settings(max_examples=1000, deadline=None)
@given(
    st.lists(st.sampled_from(["a", "b", "-", "!a", "!", "]", "a-c", "\\"]), max_size=3).map("".join),
    st.text("abcz-!]\\ ", max_size=8),
)
def test_a_bracket_set_answers_as_fnmatch(body: str, text: str) -> None:
    glob = f"*[{body}]*"
    assert matches(glob, text) == reference(glob, text)


def test_an_empty_range_adds_nothing_to_its_set() -> None:
    """`fnmatch` drops an empty range (`z-a`) by splicing its neighbours together, which can turn a
    later `!` into a negation; here it simply adds no member."""
    assert not matches("[z-a]", "b")
    assert matches("[z-a!]", "!")
    assert not matches("[z-a!]", "b")


def test_the_house_examples_match_as_documented() -> None:
    assert matches("rm -rf*", "executing shell command: RM -rf /tmp/x")
    assert not matches("drop_*", "backdrop_paint")
    assert matches("*_production*", "copy rows to orders_production now")
    assert matches("get_?", "please get_a")
    assert not matches("get_?", "get_ab")
    assert matches("[!x]y", "zy")
    assert not matches("[!x]y", "xy")
    assert matches("a[", "say a[")


def test_a_hint_of_one_letter_words_against_star_heavy_patterns_is_decided() -> None:
    """The attack of issue 27 (N1): with `fnmatch` from 2,000 word starts each of these took
    seconds; the answers themselves are what this pins (speed is `make bench`'s business)."""
    hint = " ".join("a" * 2000)
    for index in range(200):
        glob = "*a" * 50 + f"b{index}"
        assert not matches(glob, hint)
        assert matches(glob, hint + f" ab{index}")
    assert matches("*a*a*a*", hint)
