"""`StepWatch` on fake clocks: a stamp clock stepped by more than `STEP_S` against the monotonic
one is logged once per step, with the clock's name and the step; a drift up to `STEP_S` is not."""

from __future__ import annotations

import logging

import pytest

from vla_client.control.clocks import STEP_S, StepWatch, clock_name


class Ticks:
    """A clock that gives `values` in turn."""

    def __init__(self, *values: float) -> None:
        self.values = list(values)

    def __call__(self) -> float:
        return self.values.pop(0)

    def __repr__(self) -> str:
        return "Ticks()"


def test_a_step_over_the_bound_is_logged_with_the_clock_and_the_step(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # offsets (stamp - monotonic): 0, +STEP_S exactly (a drift: not logged), then -2.5 s
    stamp, monotonic = Ticks(10.0, 11.0 + STEP_S, 9.5), Ticks(10.0, 11.0, 12.0)
    watch = StepWatch(stamp, monotonic)
    with caplog.at_level(logging.WARNING, logger="vla_client.control.clocks"):
        assert [watch.read() for _ in range(3)] == [10.0, 11.0 + STEP_S, 9.5]
    assert [record.getMessage() for record in caplog.records] == [
        "Ticks() stepped -3.500 s (set by NTP or by hand?): frames stamped before the step have "
        "wrong ages; the loop's timing is not affected"
    ]


def test_the_monotonic_clock_itself_is_never_compared_with_itself() -> None:
    clock = Ticks(1.0, 5.0)
    watch = StepWatch(clock, clock)
    assert (watch.read(), watch.read()) == (1.0, 5.0)  # each read takes one value, not two


def test_a_clock_is_named_by_its_module_and_name_or_its_repr() -> None:
    import time

    assert clock_name(time.monotonic) == "time.monotonic"
    assert clock_name(Ticks()) == "Ticks()"
