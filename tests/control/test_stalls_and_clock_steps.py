"""A late loop skips the ticks it missed; a clock that steps either way does not derail it.

Before: one 1 s stall in `apply_action` at 50 Hz was followed by 49 actions fired back to back
(9 of them moved a joint 0.18 rad in half a millisecond); a frame clock set forward 10 s made
the loop send 500 actions at once, and one set back an hour stopped the loop, watchdog and all.
Fake time is a `ManualClock` slept on with `advance`; the loop reads nothing else.
"""

from __future__ import annotations

import itertools
import logging
import math
import threading
import time

import numpy as np
import pytest

from vla_client import Observation
from vla_client.control import ChunkExecutor, ControlLoop, SafetyGate, Watchdog, WatchdogTrip
from vla_client.control.pacing import STILL_S
from vla_client.errors import ClockStoppedError

RATE = 50.0
PERIOD = 1 / RATE


def loop_on(clock, executor, applied, *, stall_at=(), stall_s=1.0, **options) -> ControlLoop:
    """A 50 Hz loop in fake time whose `apply_action` records (time, action) and stalls
    `stall_s` after the applies numbered in `stall_at` (1-based)."""

    def apply_action(action):
        applied.append((clock(), float(action[0])))
        if len(applied) in stall_at:
            clock.advance(stall_s)

    return ControlLoop(
        observe=options.pop("observe"),
        executor=executor,
        apply_action=apply_action,
        rate_hz=RATE,
        sleep=clock.advance,
        **options,
    )


def pacing_log(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "vla_client.control.pacing"]


def gaps(applied) -> list[float]:
    return [round(b[0] - a[0], 6) for a, b in itertools.pairwise(applied)]


def test_a_stall_skips_the_missed_ticks_and_the_chunk_stays_aligned(
    clock, observe, policy_type, caplog
) -> None:
    """Apply 5 stalls 1 s: the next tick comes once, then one a period; 49 ticks skipped, and
    the chunk is played from the row for the time it is (5 + 49 + 1), never replayed."""
    executor = ChunkExecutor(policy_type(horizon=200), clock=clock, monotonic=clock)
    executor.tick(observe)
    executor.join(5)
    applied: list[tuple[float, float]] = []
    loop = loop_on(clock, executor, applied, stall_at=(5,), observe=observe)
    with caplog.at_level(logging.WARNING, "vla_client.control.pacing"):
        stats = loop.run(ticks=10)
    assert gaps(applied) == [PERIOD] * 4 + [1.0] + [PERIOD] * 4
    assert [row for _, row in applied] == [1, 2, 3, 4, 5, 55, 56, 57, 58, 59]
    assert (stats.ticks, stats.applied, stats.skipped, stats.overruns) == (10, 10, 49, 1)
    assert max(stats.jitter_s) == pytest.approx(1.0 - PERIOD)
    assert pacing_log(caplog) == [
        "control loop 980.0 ms late: skipped 49 tick(s) rather than run them back to back "
        "(more are counted in LoopStats.skipped, not logged)"
    ]


def test_a_held_action_is_not_sent_at_cpu_speed_after_a_stall(
    clock, observe, policy_type, caplog
) -> None:
    """The server is silent and the watchdog holds: before, a 1 s stall was followed by 50
    commands in under 20 ms. Two stalls log one warning; both are counted."""
    policy = policy_type(horizon=2, gated=True)
    policy.release()  # one chunk; later requests hang until the end
    executor = ChunkExecutor(policy, clock=clock, monotonic=clock)
    executor.tick(observe)
    executor.join(5)
    applied: list[tuple[float, float]] = []
    trips: list[WatchdogTrip] = []
    watchdog = Watchdog(0.1, "hold", on_trip=trips.append)
    loop = loop_on(clock, executor, applied, stall_at=(3, 8), observe=observe, watchdog=watchdog)
    try:
        with caplog.at_level(logging.WARNING, "vla_client.control.pacing"):
            stats = loop.run(ticks=12)
    finally:
        policy.release()
        executor.close(5)
    assert gaps(applied) == [PERIOD] * 2 + [1.0] + [PERIOD] * 4 + [1.0] + [PERIOD] * 3
    assert (stats.skipped, stats.overruns) == (98, 2)
    assert len(trips) == 1 and watchdog.tripped
    (warned,) = pacing_log(caplog)
    assert "skipped 49 tick(s)" in warned


def test_skipped_ticks_are_logged_again_on_the_next_run(clock, observe, policy_type, caplog):
    executor = ChunkExecutor(policy_type(horizon=500), clock=clock, monotonic=clock)
    executor.tick(observe)
    executor.join(5)
    applied: list[tuple[float, float]] = []
    loop = loop_on(clock, executor, applied, stall_at=(2, 5), stall_s=0.11, observe=observe)
    with caplog.at_level(logging.WARNING, "vla_client.control.pacing"):
        loop.run(ticks=3)
        loop.run(ticks=3)
    assert loop.stats.skipped == 8 and len(pacing_log(caplog)) == 2


def test_the_executor_skips_ticks_by_the_count(clock, observe, policy_type) -> None:
    executor = ChunkExecutor(policy_type(horizon=10), clock=clock, monotonic=clock)
    executor.tick(observe)
    executor.join(5)
    executor.skip(3)
    taken = executor.tick(observe)
    assert taken is not None and float(taken[0]) == 4  # rows 1-3 were the skipped ticks'
    assert executor.source is not None and executor.source.row == 4
    executor.skip(0)
    assert executor.remaining == 5
    for ticks in (-1, 1.5, True, None):
        with pytest.raises(ValueError, match=r"^ticks must be an integer >= 0; got"):
            executor.skip(ticks)


# Clock steps.


class SetClock:
    """A wall clock someone sets: real time plus an offset the test changes."""

    def __init__(self) -> None:
        self.offset = 1_700_000_000.0

    def __call__(self) -> float:
        return time.monotonic() + self.offset


@pytest.mark.parametrize("step_s", [10.0, -3600.0], ids=["forward-10s", "back-1h"])
def test_a_wall_clock_set_forward_or_back_does_not_pace_the_loop(
    policy_type, step_s, caplog
) -> None:
    """Real time: 25 ticks at 50 Hz with frames stamped on a wall clock set `step_s` at the
    5th. Before, +10 s sent 500 actions in 20 ms and -1 h stopped the loop for an hour; now
    the ticks keep their rate, the watchdog runs, and the step is logged."""
    wall = SetClock()
    policy = policy_type(horizon=3)
    executor = ChunkExecutor(policy, prefetch_at=2, clock=wall)
    applied: list[float] = []
    trips: list[WatchdogTrip] = []

    def observe():
        return Observation(
            {"wrist": np.zeros((4, 4, 3), np.uint8)}, capture_times={"wrist": wall()}
        )

    def apply_action(action):
        applied.append(time.monotonic())
        if len(applied) == 5:
            wall.offset += step_s

    loop = ControlLoop(
        observe=observe,
        executor=executor,
        apply_action=apply_action,
        rate_hz=RATE,
        watchdog=Watchdog(0.2, "hold", on_trip=trips.append),
    )
    done = threading.Event()

    def run():
        loop.run(ticks=25)
        done.set()

    worker = threading.Thread(target=run, daemon=True)
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, "vla_client.control"):
        worker.start()
        finished = done.wait(10)
        loop.stop()
        worker.join(5)
    executor.close(5)
    assert finished, "the loop stopped ticking"
    assert time.monotonic() - started >= 24 * PERIOD  # never faster than its rate
    assert loop.stats.ticks == 25 and loop.stats.clock_steps == 0
    assert executor.stats.chunks_received >= 2 and not trips
    stepped = [r.getMessage() for r in caplog.records if "stepped" in r.getMessage()]
    assert len(stepped) == 1 and f"stepped {step_s:+.3f} s" in stepped[0]


def test_a_monotonic_clock_that_goes_back_moves_the_schedule_with_it(
    clock, observe, policy_type, caplog
) -> None:
    """Only a fake or broken clock can go back; the loop goes on a period a tick, once warned."""
    executor = ChunkExecutor(policy_type(horizon=100), clock=clock, monotonic=clock)
    executor.tick(observe)
    executor.join(5)
    applied: list[tuple[float, float]] = []
    loop = loop_on(clock, executor, applied, stall_at=(3, 5), stall_s=-3600.0, observe=observe)
    with caplog.at_level(logging.WARNING, "vla_client.control.pacing"):
        stats = loop.run(ticks=6)
    back = -3600.0 + PERIOD
    assert gaps(applied) == [PERIOD, PERIOD, back, PERIOD, back]
    assert [row for _, row in applied] == [1, 2, 3, 4, 5, 6]
    assert (stats.clock_steps, stats.skipped) == (2, 0)
    assert (
        pacing_log(caplog)
        == [f"{clock!r} went back 3600.000 s: the schedule moves back with it"] * 2
    )


def test_a_monotonic_clock_that_jumps_forward_is_a_stall(clock, observe, policy_type) -> None:
    """+10 s at 50 Hz: 499 ticks skipped (before, 500 run back to back)."""
    executor = ChunkExecutor(policy_type(horizon=1000), clock=clock, monotonic=clock)
    executor.tick(observe)
    executor.join(5)
    applied: list[tuple[float, float]] = []
    loop = loop_on(clock, executor, applied, stall_at=(2,), stall_s=10.0, observe=observe)
    stats = loop.run(ticks=4)
    assert gaps(applied) == [PERIOD, 10.0, PERIOD]
    assert [row for _, row in applied] == [1, 2, 2 + 499 + 1, 503]
    assert stats.skipped == 499


@pytest.mark.parametrize(
    "build",
    [
        lambda: ChunkExecutor(lambda obs: None, monotonic=time.time),
        lambda: Watchdog(1.0, clock=time.time),
        lambda: SafetyGate(max_rate=1.0, clock=time.time),
    ],
    ids=["executor", "watchdog", "gate"],
)
def test_the_wall_clock_never_schedules(build, request) -> None:
    option = {"executor": "monotonic", "watchdog": "the watchdog's clock"}.get(
        request.node.callspec.id, "the gate's clock"
    )
    with pytest.raises(ValueError) as caught:
        build()
    assert str(caught.value) == (
        f"{option} must be a monotonic clock (time.monotonic, or a fake one in tests), not the "
        "wall clock time.time, which can be set back or forward; a wall clock may only stamp "
        "frames (ChunkExecutor(clock=))"
    )


def test_a_clock_must_be_callable() -> None:
    with pytest.raises(ValueError, match=r"^clock must be a callable giving seconds; got 1.0$"):
        ChunkExecutor(lambda obs: None, clock=1.0)
    with pytest.raises(ValueError, match=r"^monotonic must be a callable giving seconds"):
        ChunkExecutor(lambda obs: None, monotonic=None)


# A clock that stands still.


def run_in_thread(loop: ControlLoop, seconds: float) -> BaseException | None:
    """Run `loop` for up to `seconds` of real time and return what it raised; stop it and
    fail if it is still running then (before, a loop on a still clock slept forever)."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            loop.run(ticks=1000)
            outcome.append(None)
        except BaseException as exc:  # handed to the test thread
            outcome.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        loop.stop()
        worker.join(5)
        pytest.fail(f"the loop was still running after {seconds} s, having run {loop.stats.ticks}")
    return outcome[0]


@pytest.mark.parametrize("sleep", [None, lambda seconds: None], ids=["real sleep", "no sleep"])
def test_a_clock_that_stands_still_ends_the_loop(clock, observe, policy_type, sleep) -> None:
    """The (manual) clock reads 100.0 whatever happens; the loop sleeps for real (or not at
    all, spinning) and the watchdog, on the same clock, never trips. About a second of real time
    later (`STILL_S`), `run()` raises `ClockStoppedError` naming the clock."""
    executor = ChunkExecutor(policy_type(), clock=clock, monotonic=clock)
    loop = ControlLoop(
        observe=observe,
        executor=executor,
        apply_action=lambda action: None,
        rate_hz=RATE,
        watchdog=Watchdog(0.1, "hold"),
        sleep=sleep,
    )
    started = time.perf_counter()
    error = run_in_thread(loop, 10)
    executor.close(5)
    assert isinstance(error, ClockStoppedError), error
    assert time.perf_counter() - started >= STILL_S
    assert loop.stats.ticks == 1  # the first tick is due at once; the second never came
    assert str(error).startswith(
        f"{clock!r} stood still at 100.0 for 1.0 s of real time while the control loop waited "
        "for its next tick: the ticks, the reply deadlines and the watchdog all run on it; give "
        "ChunkExecutor(monotonic=) a clock that advances (time.monotonic)"
    )


def test_a_coarse_clock_that_advances_is_not_taken_for_a_stopped_one(
    observe_untimed, policy_type
) -> None:
    """A clock that moves in quarter seconds stands still across many 20 ms sleeps, never for
    a second: 1.2 s of real time at 50 Hz run without an error (ticks bunch up and skip)."""

    def coarse() -> float:
        return math.floor(time.monotonic() * 4) / 4

    executor = ChunkExecutor(policy_type(horizon=500), clock=coarse, monotonic=coarse)
    loop = ControlLoop(
        observe=observe_untimed,
        executor=executor,
        apply_action=lambda action: None,
        rate_hz=RATE,
    )
    timer = threading.Timer(1.2, loop.stop)
    timer.start()
    error = run_in_thread(loop, 10)
    timer.cancel()
    executor.close(5)
    assert error is None and loop.stats.ticks >= 4
