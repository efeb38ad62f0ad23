"""Every numeric option of the control loop is finite and in range, checked when it is given.

`ControlLoop(rate_hz=nan)` ran 40 ticks in 0.01 s (unpaced), `reply_deadline_s=-1` dropped
every reply so the robot never moved, and `run(ticks=-5)` did nothing; each is now a
`ValueError` naming what is valid.
"""

from __future__ import annotations

import math

import pytest

from vla_client.control import ChunkExecutor, ControlLoop, Watchdog

NAN, INF = math.nan, math.inf


def make_loop(policy_type, **options) -> ControlLoop:
    return ControlLoop(
        observe=lambda: None,  # type: ignore[arg-type, return-value]
        executor=ChunkExecutor(policy_type()),
        apply_action=lambda action: None,
        **{"rate_hz": 10.0, **options},
    )


@pytest.mark.parametrize("rate_hz", [NAN, INF, -INF, 0, -20.0, "20", None, True])
def test_a_rate_that_cannot_pace_a_loop_is_refused(policy_type, rate_hz) -> None:
    with pytest.raises(ValueError) as caught:
        make_loop(policy_type, rate_hz=rate_hz)
    assert str(caught.value) == f"rate_hz must be a finite number > 0; got {rate_hz!r}"


@pytest.mark.parametrize(
    ("option", "value", "valid"),
    [
        ("reply_deadline_s", -1.0, "a finite number > 0"),
        ("reply_deadline_s", 0, "a finite number > 0"),
        ("reply_deadline_s", NAN, "a finite number > 0"),
        ("reply_deadline_s", INF, "a finite number > 0"),
        ("max_observation_age_s", 0, "a finite number > 0"),
        ("max_observation_age_s", -0.1, "a finite number > 0"),
        ("max_observation_age_s", NAN, "a finite number > 0"),
        ("max_observation_age_s", INF, "a finite number > 0"),
        ("max_observation_age_s", "0.1", "a finite number > 0"),
        ("prefetch_at", 1.5, "an integer >= 0"),
        ("prefetch_at", True, "an integer >= 0"),
        ("blend_steps", -1, "an integer >= 0"),
        ("blend_steps", NAN, "an integer >= 0"),
    ],
)
def test_an_executor_option_out_of_range_is_refused(policy_type, option, value, valid) -> None:
    with pytest.raises(ValueError) as caught:
        ChunkExecutor(policy_type(), **{option: value})
    assert str(caught.value) == f"{option} must be {valid}; got {value!r}"


def test_the_edges_of_the_executor_options_are_taken(policy_type) -> None:
    at_zero = ChunkExecutor(policy_type(), prefetch_at=0, blend_steps=0)
    assert (at_zero._prefetch_at, at_zero._blend_steps) == (0, 0)
    unbounded = ChunkExecutor(policy_type(), max_observation_age_s=None, reply_deadline_s=None)
    assert (unbounded._max_age, unbounded._deadline) == (None, None)
    tiny = ChunkExecutor(policy_type(), max_observation_age_s=1e-6, reply_deadline_s=1e-6)
    assert (tiny._max_age, tiny._deadline) == (1e-6, 1e-6)


@pytest.mark.parametrize("ticks", [-5, -1, 1.5, NAN, INF, "3", True])
def test_a_tick_count_that_is_not_a_count_is_refused(policy_type, ticks) -> None:
    loop = make_loop(policy_type)
    with pytest.raises(ValueError) as caught:
        loop.run(ticks=ticks)
    assert str(caught.value) == f"ticks must be an integer >= 0; got {ticks!r}"
    assert loop.stats.ticks == 0


def test_zero_ticks_run_nothing(policy_type) -> None:
    assert make_loop(policy_type).run(ticks=0).ticks == 0


def test_an_infinite_watchdog_timeout_is_refused() -> None:
    """It would never trip: leave the watchdog out instead."""
    with pytest.raises(ValueError, match=r"^timeout_s must be a finite number > 0; got inf$"):
        Watchdog(INF)
