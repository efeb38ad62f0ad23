"""The control loop's timing runs on one monotonic clock: the executor's, which the loop, the
watchdog and the gate take.

The executor once stamped `last_chunk_at` on its frame clock (`ChunkExecutor(clock=time.time)`
for cameras that stamp frames with wall time); a watchdog reading `time.monotonic` against it
measured a silence of minus 1.7e9 s and never tripped. The frame clock now only ages frames;
`last_chunk_at`, the ticks and the watchdog run on the executor's `monotonic` clock. A watchdog
built without a clock takes the loop's, and one that differs is refused when the loop is built.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from vla_client.control import ChunkExecutor, ControlLoop, Watchdog, WatchdogTrip


def loop_of(executor: ChunkExecutor, watchdog: Watchdog | None = None, **options) -> ControlLoop:
    return ControlLoop(
        observe=options.pop("observe", lambda: None),
        executor=executor,
        apply_action=options.pop("apply_action", lambda action: None),
        rate_hz=options.pop("rate_hz", 10),
        watchdog=watchdog,
        **options,
    )


def test_a_loop_on_wall_clock_frames_runs_its_watchdog_on_the_monotonic_clock(
    policy_type, observe_untimed
) -> None:
    """0.4 s of real silence against a 0.2 s timeout trips it, on `time.monotonic`."""
    policy = policy_type(horizon=2, gated=True)
    policy.release()  # the first chunk comes; every later request hangs
    executor = ChunkExecutor(policy, clock=time.time)
    trips: list[WatchdogTrip] = []
    watchdog = Watchdog(0.2, "hold", on_trip=trips.append)
    loop = loop_of(executor, watchdog, observe=observe_untimed, rate_hz=50)
    assert loop.clock is time.time and loop.monotonic is watchdog.clock is time.monotonic
    executor.tick(observe_untimed)
    assert executor.join(5)
    try:
        stats = loop.run(ticks=30)  # 0.6 s
    finally:
        policy.release()
        executor.close(5)
    assert executor.stats.chunks_received == 1 and stats.applied == 30
    assert len(trips) == 1 and 0.2 < trips[0].silent_s < 1.0


def test_a_watchdog_in_a_loop_on_a_fake_clock_measures_fake_silence(
    clock, observe, policy_type
) -> None:
    policy = policy_type(horizon=2, gated=True)
    policy.release()
    executor = ChunkExecutor(policy, clock=clock, monotonic=clock)
    trips: list[WatchdogTrip] = []
    watchdog = Watchdog(0.25, "zero", on_trip=trips.append)
    applied: list[np.ndarray] = []
    loop = loop_of(
        executor, watchdog, observe=observe, apply_action=applied.append, sleep=clock.advance
    )
    executor.tick(observe)
    assert executor.join(5)
    try:
        loop.run(ticks=6)
    finally:
        policy.release()
        executor.close(5)
    assert executor.last_chunk_at == 100.0 and executor.stats.chunks_received == 1
    # Ticks at 100.0 .. 100.5: row 1, then held until the silence passes 0.25 s, then zeros.
    assert [trip.silent_s for trip in trips] == [pytest.approx(0.3)]
    assert [a.tolist() for a in applied] == [[1.0, 1.0]] * 3 + [[0.0, 0.0]] * 3


def test_a_loop_clock_other_than_the_executors_is_refused(policy_type) -> None:
    with pytest.raises(ValueError) as caught:
        loop_of(ChunkExecutor(policy_type()), clock=time.time)
    assert str(caught.value) == (
        "the loop's clock time.time is not the executor's time.monotonic: frames are stamped on "
        "one clock; give ChunkExecutor the clock and leave ControlLoop's out"
    )
    same = ChunkExecutor(policy_type(), clock=time.time)
    assert loop_of(same, clock=time.time).clock is time.time


def test_a_watchdog_built_with_another_clock_is_refused(clock, policy_type) -> None:
    watchdog = Watchdog(0.5, clock=clock)
    with pytest.raises(ValueError) as caught:
        loop_of(ChunkExecutor(policy_type(), clock=time.time), watchdog)
    assert str(caught.value) == (
        f"the watchdog runs on {clock!r}, the loop on time.monotonic: silence would be measured "
        "across two clocks; give the watchdog the loop's clock, or no clock to take the loop's"
    )
    assert watchdog.clock is clock
    # The frame clock is not the one that counts: a wall-clock executor's loop takes it.
    on_the_wall = ChunkExecutor(policy_type(), clock=time.time)
    assert loop_of(on_the_wall, Watchdog(0.5, clock=time.monotonic)).monotonic is time.monotonic


def test_a_watchdog_keeps_the_clock_of_its_first_loop(clock, policy_type) -> None:
    watchdog = Watchdog(0.5)
    assert watchdog.clock is None
    loop_of(ChunkExecutor(policy_type(), clock=clock, monotonic=clock), watchdog)
    assert watchdog.clock is clock
    loop_of(
        ChunkExecutor(policy_type(), clock=clock, monotonic=clock), watchdog
    )  # the same clock: fine
    with pytest.raises(ValueError, match=r"^the watchdog runs on .*ManualClock"):
        loop_of(ChunkExecutor(policy_type()), watchdog)


def test_a_watchdog_used_alone_reads_the_monotonic_clock() -> None:
    watchdog = Watchdog(0.5)
    watchdog.filter(None, None)
    assert watchdog.clock is time.monotonic
