"""Watchdog: hold, zero, stop and finish_chunk when the server goes silent, and recovery."""

from __future__ import annotations

import numpy as np
import pytest

from vla_client.control import ServerSilentError, Watchdog
from vla_client.errors import VLAClientError


def a(x):
    return np.float32([x])


def run(watchdog, clock, actions, last_chunk_at, step=0.1):
    """Feed one action per 0.1 s tick; return what the watchdog let through (as floats)."""
    out = []
    for action in actions:
        passed = watchdog.filter(None if action is None else a(action), last_chunk_at)
        out.append(None if passed is None else float(passed[0]))
        clock.advance(step)
    return out


def test_passes_actions_through_while_chunks_arrive(clock):
    watchdog = Watchdog(0.5, clock=clock)
    assert run(watchdog, clock, [1, 2, 3], last_chunk_at=clock()) == [1, 2, 3]
    assert not watchdog.tripped


def test_starved_tick_repeats_the_last_action_before_the_timeout(clock):
    watchdog = Watchdog(0.5, clock=clock)
    assert run(watchdog, clock, [None, 1, None, None], last_chunk_at=clock()) == [None, 1, 1, 1]
    assert watchdog.trips == 0


def test_hold_stops_following_the_chunk_once_tripped(clock):
    trips = []
    watchdog = Watchdog(0.25, "hold", on_trip=trips.append, clock=clock)
    chunk_at = clock()
    # Ticks at 0, 0.1, 0.2 are within the timeout; 0.3 onwards the server is silent.
    assert run(watchdog, clock, [1, 2, 3, 4, 5, 6], chunk_at) == [1, 2, 3, 3, 3, 3]
    assert watchdog.tripped and watchdog.trips == 1
    assert len(trips) == 1
    assert trips[0].behaviour == "hold"
    assert trips[0].silent_s == pytest.approx(0.3)


def test_new_chunk_clears_the_trip(clock):
    watchdog = Watchdog(0.25, "hold", clock=clock)
    run(watchdog, clock, [1, 2, 3, 4], clock())
    assert watchdog.tripped
    assert run(watchdog, clock, [7, 8], last_chunk_at=clock()) == [7, 8]
    assert not watchdog.tripped
    assert watchdog.trips == 1


def test_finish_chunk_plays_to_the_end_then_holds(clock):
    watchdog = Watchdog(0.15, "finish_chunk", clock=clock)
    assert run(watchdog, clock, [1, 2, 3, 4, None, None], clock()) == [1, 2, 3, 4, 4, 4]
    assert watchdog.tripped


def test_stop_sends_the_stop_action(clock):
    watchdog = Watchdog(0.15, "stop", stop_action=[0.0], clock=clock)
    assert run(watchdog, clock, [1, 2, 3, 4], clock()) == [1, 2, 0, 0]


def test_stop_without_a_stop_action_raises(clock):
    watchdog = Watchdog(0.15, "stop", clock=clock)
    chunk_at = clock()
    run(watchdog, clock, [1, 2], chunk_at)
    with pytest.raises(ServerSilentError) as caught:
        watchdog.filter(a(3), chunk_at)
    assert isinstance(caught.value, VLAClientError)


def test_silence_before_the_first_chunk_counts_from_the_first_tick(clock):
    watchdog = Watchdog(0.25, "stop", stop_action=[-1.0], clock=clock)
    clock.advance(10.0)  # time before the loop starts does not count
    assert run(watchdog, clock, [None, None, None, None], last_chunk_at=None) == [
        None,
        None,
        None,
        -1,
    ]


def test_zero_commands_zero_in_every_dimension_once_tripped(clock):
    watchdog = Watchdog(0.15, "zero", clock=clock)
    chunk_at = clock()
    passed = [watchdog.filter(np.float32([x, -x, 0.5]), chunk_at) for x in (1.0, 2.0)]
    clock.advance(0.2)
    tripped = watchdog.filter(np.float32([3.0, -3.0, 0.5]), chunk_at)
    starved = watchdog.filter(None, chunk_at)
    assert [p.tolist() for p in passed] == [[1, -1, 0.5], [2, -2, 0.5]]
    assert tripped is not None and tripped.tolist() == [0, 0, 0] and tripped.dtype == np.float32
    assert starved is not None and starved.tolist() == [0, 0, 0]
    assert watchdog.trips == 1
    # A new chunk clears the trip: its actions pass again.
    assert watchdog.filter(np.float32([4.0, 0, 0]), clock()).tolist() == [4, 0, 0]


def test_zero_before_any_action_sends_nothing(clock):
    watchdog = Watchdog(0.25, "zero", clock=clock)
    assert run(watchdog, clock, [None] * 4, last_chunk_at=None) == [None] * 4
    assert watchdog.tripped


def test_hold_repeats_a_velocity_through_the_outage_where_zero_stops(clock):
    """The reason `zero` exists: `hold` keeps a velocity-driven robot moving."""
    moving = {}
    for behaviour in ("hold", "zero"):
        watchdog = Watchdog(0.25, behaviour, clock=clock)
        moving[behaviour] = run(watchdog, clock, [1, 1, 1, 1, 1, 1], clock())[3:]
    assert moving == {"hold": [1, 1, 1], "zero": [0, 0, 0]}


@pytest.mark.parametrize("behaviour", ["halt", "Hold", "stop_now", "", None, 0])
def test_an_unknown_behaviour_is_refused_naming_the_choices(behaviour):
    with pytest.raises(
        ValueError,
        match="behaviour must be one of 'hold', 'zero', 'stop', 'finish_chunk'; got",
    ):
        Watchdog(1.0, behaviour)


@pytest.mark.parametrize("timeout_s", [0.0, -1.0, float("nan"), float("inf"), None, "1"])
def test_timeout_must_be_positive(timeout_s):
    with pytest.raises(ValueError, match="timeout_s must be a finite number > 0"):
        Watchdog(timeout_s)


@pytest.mark.parametrize("behaviour", ["hold", "zero", "finish_chunk"])
def test_a_stop_action_with_another_behaviour_is_refused(behaviour):
    with pytest.raises(ValueError, match="stop_action is only used by behaviour 'stop'"):
        Watchdog(1.0, behaviour, stop_action=[0.0])


def test_a_non_finite_stop_action_is_refused():
    with pytest.raises(ValueError, match="stop_action must be finite"):
        Watchdog(1.0, "stop", stop_action=[0.0, np.nan])
