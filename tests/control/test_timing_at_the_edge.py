"""Time limits of the control side exactly at, just under and just over, on a manual clock.

The watchdog trips once the silence is longer than its timeout (a silence of exactly
`timeout_s` is not yet silent); the executor sends an observation exactly `max_observation_age_s`
old and keeps a reply that took exactly `reply_deadline_s`. The values are chosen to be exact
in binary (100.0, 0.25, 0.5), and "just over" is the next float up (`EPS` apart), so an
off-by-one in any comparison fails here. The watchdog must count on the monotonic clock: a
wall-clock jump (NTP, a user setting the time) must not trip it.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from types import ModuleType

import numpy as np
import pytest

from vla_client.control import ChunkExecutor, ServerSilentError, Watchdog

START = 100.0
TIMEOUT = 0.5
EPS = 2.0**-46  # the spacing of floats between 64 and 128: START +- EPS is the next float
EDGES = ["just-under", "at", "just-over"]


def action(value: float) -> np.ndarray:
    return np.float32([value])


@pytest.mark.parametrize(
    ("now", "tripped"),
    [(START + TIMEOUT - EPS, False), (START + TIMEOUT, False), (START + TIMEOUT + EPS, True)],
    ids=EDGES,
)
@pytest.mark.parametrize("behaviour", ["hold", "zero", "stop", "finish_chunk"])
def test_the_watchdog_trips_only_past_its_timeout(clock, now, tripped, behaviour) -> None:
    trips = []
    stop_action = [-1.0] if behaviour == "stop" else None
    watchdog = Watchdog(
        TIMEOUT, behaviour, stop_action=stop_action, on_trip=trips.append, clock=clock
    )
    assert clock() == START
    assert float(watchdog.filter(action(1), last_chunk_at=START)[0]) == 1
    clock.now = now
    passed = watchdog.filter(action(2), last_chunk_at=START)
    assert watchdog.tripped is tripped and watchdog.trips == len(trips) == int(tripped)
    after_trip = {"hold": 1.0, "zero": 0.0, "stop": -1.0, "finish_chunk": 2.0}[behaviour]
    expected = after_trip if tripped else 2.0
    assert float(passed[0]) == expected
    if tripped:
        assert trips[0].silent_s > TIMEOUT


@pytest.mark.parametrize(
    ("now", "tripped"),
    [(START + TIMEOUT, False), (START + TIMEOUT + EPS, True)],
    ids=["at", "just-over"],
)
def test_silence_before_the_first_chunk_has_the_same_edge(clock, now, tripped) -> None:
    watchdog = Watchdog(TIMEOUT, "stop", clock=clock)
    assert watchdog.filter(None, last_chunk_at=None) is None  # the silence starts here
    clock.now = now
    if tripped:
        with pytest.raises(ServerSilentError):
            watchdog.filter(None, last_chunk_at=None)
    else:
        assert watchdog.filter(None, last_chunk_at=None) is None
        assert not watchdog.tripped


def load_fresh_watchdog_module(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """A private copy of `vla_client.control.watchdog`, so its defaults bind the patched clocks.

    The copy lives in `sys.modules` only for the test; the real module is left as it is.
    """
    name = "watchdog_under_test"
    spec = importlib.util.spec_from_file_location(name, sys.modules[Watchdog.__module__].__file__)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)
    spec.loader.exec_module(module)
    return module


def test_a_wall_clock_jump_does_not_trip_the_watchdog(monkeypatch) -> None:
    """Its default clock must be monotonic: the wall clock jumps an hour, nothing happens."""
    wall, monotonic = [1_700_000_000.0], [START]
    monkeypatch.setattr(time, "time", lambda: wall[0])
    monkeypatch.setattr(time, "monotonic", lambda: monotonic[0])
    fresh = load_fresh_watchdog_module(monkeypatch)
    watchdog = fresh.Watchdog(TIMEOUT, "stop")  # the default clock
    assert float(watchdog.filter(action(1), last_chunk_at=START)[0]) == 1
    wall[0] += 3600.0  # the wall clock is set an hour ahead
    assert float(watchdog.filter(action(2), last_chunk_at=START)[0]) == 2
    assert not watchdog.tripped
    wall[0] -= 7200.0  # and an hour back
    assert float(watchdog.filter(action(3), last_chunk_at=START)[0]) == 3
    monotonic[0] += TIMEOUT + 0.25  # real silence does trip it
    with pytest.raises(ServerSilentError):
        watchdog.filter(action(4), last_chunk_at=START)


@pytest.mark.parametrize(
    ("age", "sent"), [(0.5 - EPS, True), (0.5, True), (0.5 + EPS, False)], ids=EDGES
)
def test_the_executor_sends_an_observation_exactly_max_age_old(
    clock, observe_aged, policy_type, age, sent
) -> None:
    assert START - (START - age) == age  # the age the executor computes, to the last bit
    policy = policy_type()
    executor = ChunkExecutor(policy, max_observation_age_s=0.5, clock=clock, monotonic=clock)
    executor.tick(observe_aged(age))
    executor.join(5)
    assert len(policy.requests) == int(sent)
    assert executor.stats.stale_observations == int(not sent)


@pytest.mark.parametrize(
    ("infer_s", "kept"), [(0.25 - EPS, True), (0.25, True), (0.25 + EPS, False)], ids=EDGES
)
def test_the_executor_keeps_a_reply_that_took_exactly_its_deadline(
    clock, observe, policy_type, infer_s, kept, caplog
) -> None:
    assert (START + infer_s) - START == infer_s
    policy = policy_type(clock=clock, infer_s=infer_s)
    executor = ChunkExecutor(policy, reply_deadline_s=0.25, clock=clock, monotonic=clock)
    with caplog.at_level("WARNING", logger="vla_client.control.chunk"):
        executor.tick(observe)
        executor.join(5)
        taken = executor.tick(observe)
    assert (taken is not None) is kept
    assert executor.stats.dropped_late == int(not kept)
    assert executor.stats.chunks_received == int(kept)
    dropped = [r.getMessage() for r in caplog.records if "dropped" in r.getMessage()]
    if kept:
        assert dropped == []
    else:
        assert dropped == [  # the next float over 0.25 s, shown to 3 digits
            f"dropped late reply {policy.requests[0]} (1 ticks old; it took 0.25 s, over "
            "reply_deadline_s=0.25)"
        ]
