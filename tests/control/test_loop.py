"""ControlLoop: absolute-deadline schedule, call order, stopping and surfaced errors."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from vla_client.control import (
    ChunkExecutor,
    ControlLoop,
    SafetyGate,
    SimRobot,
    UnsafeActionError,
    Watchdog,
)


def primed_executor(policy, clock, observe):
    """An executor whose first chunk is in hand, so every loop tick has an action."""
    executor = ChunkExecutor(policy, clock=clock, monotonic=clock)
    executor.tick(observe)
    executor.join(5)
    return executor


def fake_time_loop(clock, executor, observe, apply_action, **options):
    return ControlLoop(
        observe=observe,
        executor=executor,
        apply_action=apply_action,
        rate_hz=10,
        clock=clock,
        sleep=options.pop("sleep", clock.advance),
        **options,
    )


def test_ticks_start_on_the_absolute_schedule_without_drift(clock, observe, policy_type):
    executor = primed_executor(policy_type(horizon=100), clock, observe)
    starts = []

    def apply_action(action):
        starts.append(clock())
        clock.advance(0.03)  # work inside the tick

    start = clock()
    # Every sleep overshoots by 10 ms; a loop that sleeps relative to its last tick would drift.
    loop = fake_time_loop(
        clock, executor, observe, apply_action, sleep=lambda d: clock.advance(d + 0.01)
    )
    stats = loop.run(ticks=8)
    expected = [start] + [start + i * 0.1 + 0.01 for i in range(1, 8)]
    assert starts == pytest.approx(expected)
    assert list(stats.jitter_s) == pytest.approx([0.0] + [0.01] * 7)
    assert stats.overruns == 0


def test_a_tick_late_by_a_period_skips_the_one_it_missed(clock, observe, policy_type):
    """Tick 2 works 0.25 s at 10 Hz: tick 3 (due at 0.3 s) starts at 0.45 s. Slot 3 has
    passed, so it runs as slot 4 (row 5 of the chunk), and tick 5 comes a period later."""
    executor = primed_executor(policy_type(horizon=100), clock, observe)
    work = {2: 0.25}
    count = iter(range(100))
    applied, starts = [], []

    def apply_action(action):
        applied.append(float(action[0]))
        starts.append(clock() - 100.0)
        clock.advance(work.get(next(count), 0.0))

    stats = fake_time_loop(clock, executor, observe, apply_action).run(ticks=6)
    assert list(stats.jitter_s) == pytest.approx([0, 0, 0, 0.15, 0, 0])
    assert starts == pytest.approx([0, 0.1, 0.2, 0.45, 0.55, 0.65])
    assert applied == [1, 2, 3, 5, 6, 7]
    assert (stats.overruns, stats.skipped) == (1, 1)
    assert stats.ticks == stats.applied == 6


def test_gate_output_is_what_the_robot_gets(clock, observe, policy_type):
    executor = primed_executor(policy_type(horizon=100), clock, observe)
    applied = []
    gate = SafetyGate(low=[0, 0], high=[4, 10], on_bounds="clip")
    fake_time_loop(clock, executor, observe, applied.append, gate=gate).run(ticks=6)
    assert [float(a[0]) for a in applied] == [1, 2, 3, 4, 4, 4]
    assert gate.clipped == 2


def test_rejected_action_ends_the_loop_before_the_robot_gets_it(clock, observe, policy_type):
    executor = primed_executor(policy_type(horizon=100), clock, observe)
    applied = []
    loop = fake_time_loop(
        clock, executor, observe, applied.append, gate=SafetyGate(low=0, high=[2, 10])
    )
    with pytest.raises(UnsafeActionError):
        loop.run(ticks=6)
    assert [float(a[0]) for a in applied] == [1, 2]
    assert loop.stats.ticks == 3


def test_idle_ticks_before_the_first_chunk_call_nothing(clock, observe, policy_type):
    policy = policy_type(gated=True)
    applied = []
    loop = fake_time_loop(
        clock, ChunkExecutor(policy, clock=clock, monotonic=clock), observe, applied.append
    )
    stats = loop.run(ticks=4)
    policy.release()
    assert applied == []
    assert (stats.ticks, stats.idle, stats.applied) == (4, 4, 0)


def test_watchdog_holds_between_chunks(clock, observe, policy_type):
    policy = policy_type(horizon=3, gated=True)
    policy.release()
    executor = primed_executor(policy, clock, observe)
    applied = []
    watchdog = Watchdog(10.0, clock=clock)
    fake_time_loop(clock, executor, observe, applied.append, watchdog=watchdog).run(ticks=5)
    policy.release()
    # Chunk rows 1, 2 are played, then the next request is in flight: hold row 2.
    assert [float(a[0]) for a in applied] == [1, 2, 2, 2, 2]


def test_stop_from_apply_action_ends_the_run(clock, observe, policy_type):
    executor = primed_executor(policy_type(horizon=100), clock, observe)
    applied = []

    def apply_action(action):
        applied.append(action)
        if len(applied) == 3:
            loop.stop()

    loop = fake_time_loop(clock, executor, observe, apply_action)
    stats = loop.run()
    assert stats.ticks == 3


def test_exception_in_observe_surfaces(clock, policy_type):
    def observe():
        raise KeyError("camera unplugged")

    executor = ChunkExecutor(policy_type(), clock=clock, monotonic=clock)
    loop = fake_time_loop(clock, executor, observe, lambda action: None)
    with pytest.raises(KeyError, match="camera unplugged"):
        loop.run(ticks=3)


def test_exception_in_apply_action_surfaces(clock, observe, policy_type):
    def apply_action(action):
        raise KeyError("motor fault")

    executor = primed_executor(policy_type(), clock, observe)
    loop = fake_time_loop(clock, executor, observe, apply_action)
    with pytest.raises(KeyError, match="motor fault"):
        loop.run(ticks=3)
    assert loop.stats.ticks == 1


def test_rate_must_be_positive(clock, observe, policy_type):
    with pytest.raises(ValueError):
        ControlLoop(
            observe=observe,
            executor=ChunkExecutor(policy_type()),
            apply_action=lambda action: None,
            rate_hz=0,
        )


def test_real_time_loop_keeps_its_schedule_and_drives_the_sim(policy_type):
    """Each tick does 6 ms of work; the ticks still start on the 10 ms grid, without drift.

    A loop that slept a period after each tick's work (or that paced relative to the last tick)
    would fall 6 ms behind per tick, 234 ms by the 40th; the bounds allow 120 ms of lateness
    for a busy machine, measured with this test's own clock, not only the loop's jitter. A
    machine busy enough to make a tick a period late makes the loop skip ticks: the grid then
    moves on by the ticks skipped, and starts again from the late tick (less than a period on).
    """
    robot = SimRobot(action_dim=2, dt=0.01)
    policy = policy_type(horizon=10, infer_s=0.02)
    executor = ChunkExecutor(policy, prefetch_at=5, blend_steps=2)
    applied, ticked = [], []
    tick = executor.tick

    def timed_tick(observe):
        ticked.append(time.monotonic())
        return tick(observe)

    executor.tick = timed_tick  # the loop calls it once at the start of every tick
    skip, skips = executor.skip, []

    def counted_skip(ticks):
        skips.append((len(ticked), ticks))
        skip(ticks)

    executor.skip = counted_skip  # the loop calls it before the tick that skipped

    def apply_action(action):
        applied.append(action)
        robot.apply(action)
        time.sleep(0.006)

    loop = ControlLoop(
        observe=robot.observe, executor=executor, apply_action=apply_action, rate_hz=100
    )
    started = time.monotonic()
    stats = loop.run(ticks=40)
    elapsed = time.monotonic() - started
    executor.close(5)
    restarts = 0.01 * stats.overruns
    assert 39 * 0.01 <= elapsed < (39 + stats.skipped) * 0.01 + restarts + 0.12 + 0.006
    assert stats.ticks == 40 and stats.applied + stats.idle == 40
    assert stats.jitter_ms().count == 40
    jitter = list(stats.jitter_s)
    assert min(jitter) >= 0.0 and max(jitter) < 0.12
    assert sum(n for _, n in skips) == stats.skipped and len(skips) == stats.overruns
    slots = [i + sum(n for at, n in skips if at <= i) for i in range(len(ticked))]
    lateness = [t - (started + slot * 0.01) for slot, t in zip(slots, ticked, strict=True)]
    assert len(ticked) == 40 and min(lateness) >= 0.0 and max(lateness) < 0.12 + restarts
    # Lateness does not build up: the last ten ticks are not the 180 to 234 ms late that
    # drift would make them (a busy machine may make them tens of ms late).
    assert np.median(lateness[-10:]) < 0.1 + restarts and np.median(jitter[-10:]) < 0.1
    assert executor.stats.chunks_received >= 2
    assert executor.stats.dropped_mismatched == executor.stats.dropped_late == 0
    assert robot.steps == len(applied)
    assert np.allclose(robot.position, np.sum(applied, axis=0) * 0.01, atol=1e-4)
    assert all(np.isfinite(a).all() for a in applied)


def test_stop_from_another_thread_wakes_a_sleeping_loop(observe, policy_type):
    policy = policy_type(gated=True)
    loop = ControlLoop(
        observe=observe,
        executor=ChunkExecutor(policy),
        apply_action=lambda action: None,
        rate_hz=0.5,  # a 2 s period: the stop must cut the sleep short
    )
    threading.Timer(0.1, loop.stop).start()
    started = time.monotonic()
    stats = loop.run()
    policy.release()
    assert time.monotonic() - started < 1.5
    assert stats.ticks == 1
