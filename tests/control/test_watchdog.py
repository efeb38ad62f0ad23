"""Watchdog: hold, stop and finish_chunk when the server goes silent, and recovery."""

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


def test_timeout_must_be_positive():
    with pytest.raises(ValueError):
        Watchdog(0.0)
