"""Nesting depth of parsed JSON, measured without recursion (jsonrpc/nesting.py)."""

from __future__ import annotations

from typing import Any

import pytest

from aql_mcp.jsonrpc.nesting import exceeds_depth, may_exceed_depth


@pytest.mark.parametrize(
    ("value", "depth"),
    [(1, 0), ("s", 0), (None, 0), ({}, 1), ([], 1), ({"a": 1}, 1), ({"a": []}, 2), ([[{"b": [1]}]], 4)],
)
def test_depth_counts_each_object_or_array_as_one_level(value: Any, depth: int) -> None:
    assert not exceeds_depth(value, depth)
    assert exceeds_depth(value, depth - 1) is (depth > 0)


def test_a_value_deeper_than_the_interpreter_recursion_limit_is_measured() -> None:
    value: list[Any] = []
    for _ in range(100_000):
        value = [value]
    assert exceeds_depth(value, 1000)
    assert not exceeds_depth(value, 100_001)


def test_the_byte_pretest_never_skips_a_body_that_nests_past_the_limit() -> None:
    assert may_exceed_depth(b"[[[]]]", 2)
    assert may_exceed_depth(b'{"a":"[[[["}', 1)  # brackets inside strings only over-count
    assert not may_exceed_depth(b'{"a":[1]}', 2)
