"""A clock a test sets by hand: what the service's injectable `clock=` callables read in tests."""

from __future__ import annotations


class Clock:
    """Returns `now` when called; a test moves it with `advance` or by setting `now`."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
