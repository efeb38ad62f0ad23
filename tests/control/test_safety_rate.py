"""SafetyGate's `max_rate`: a limit per second, measured between the actions it passes.

`max_delta` bounds each step however close together the calls come: at 50 Hz with
`max_delta=0.021` (meant as about 1 rad/s), nine calls 0.06 ms apart moved a joint 0.18 rad
in half a millisecond. `max_rate` holds
the speed whatever the spacing; `max_delta` stays a cap on any one step, however long since
the last (after a stall, say). Times come from a `ManualClock`, so each limit is exact.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from vla_client.control import ChunkExecutor, ControlLoop, SafetyGate, UnsafeActionError

RATE = 1.0  # units per second


def test_a_burst_is_held_to_the_rate(clock) -> None:
    """Steps of 0.02 every 0.06 ms pass `max_delta=0.021`; `max_rate=1` allows 6e-5 each."""
    by_step = SafetyGate(max_delta=0.021)
    by_rate = SafetyGate(max_rate=RATE, clock=clock)
    for gate in (by_step, by_rate):
        gate.check([0.0])
    clock.advance(0.00006)
    assert float(by_step.check([0.02])[0]) == pytest.approx(0.02)
    with pytest.raises(UnsafeActionError) as caught:
        by_rate.check([0.02])
    assert str(caught.value) == (
        "step too large at dim 0: 0.0 to 0.02 is 0.02, limit 6e-05 (max_rate 1.0 per s for 0.06 ms)"
    )
    assert by_rate.rejected == 1 and float(by_rate.last_action[0]) == 0.0


def test_clipping_to_the_rate_moves_at_the_rate(clock) -> None:
    gate = SafetyGate(max_rate=[RATE, 2 * RATE], on_delta="clip", clock=clock)
    gate.check([0.0, 0.0])
    positions = []
    for _ in range(5):
        clock.advance(0.02)
        positions.append(gate.check([1.0, -1.0]))
    expected = [[0.02 * k, -0.04 * k] for k in range(1, 6)]
    np.testing.assert_allclose(positions, expected, rtol=1e-6)
    assert np.array_equal(gate.check([1.0, -1.0]), positions[-1])  # no time, no move
    assert gate.clipped == 6


def test_a_slow_loop_gets_the_rate_a_per_call_limit_would_refuse(clock) -> None:
    """At 10 Hz a robot at 0.9 units/s moves 0.09 a tick: within `max_rate=1`, while a
    `max_delta` tuned for 50 Hz (0.021) stops it on the second tick."""
    by_rate = SafetyGate(max_rate=RATE, clock=clock)
    by_step = SafetyGate(max_delta=0.021)
    for gate in (by_rate, by_step):
        gate.check([0.0])
    for tick in range(1, 11):
        clock.advance(0.1)
        assert float(by_rate.check([0.09 * tick])[0]) == pytest.approx(0.09 * tick)
    with pytest.raises(UnsafeActionError, match=r"^step too large at dim 0: .* limit 0.021$"):
        by_step.check([0.09])


def test_max_delta_caps_a_step_after_a_pause(clock) -> None:
    """A second of silence earns 1.0 by the rate; the per-step cap keeps it at 0.021."""
    for on_delta in ("clip", "reject"):
        gate = SafetyGate(max_rate=RATE, max_delta=0.021, on_delta=on_delta, clock=clock)
        gate.check([0.0])
        clock.advance(1.0)
        if on_delta == "clip":
            assert float(gate.check([0.5])[0]) == pytest.approx(0.021)
            continue
        with pytest.raises(UnsafeActionError) as caught:
            gate.check([0.5])
        assert str(caught.value) == "step too large at dim 0: 0.0 to 0.5 is 0.5, limit 0.021"


def test_a_reset_reference_starts_the_rate_from_the_reset(clock) -> None:
    gate = SafetyGate(max_rate=RATE, clock=clock)
    clock.advance(5.0)
    gate.reset([0.0])
    clock.advance(0.5)
    assert float(gate.check([0.5])[0]) == 0.5
    with pytest.raises(UnsafeActionError) as caught:
        gate.check([0.6])
    step = np.float32(0.6) - np.float32(0.5)
    assert str(caught.value) == (
        f"step too large at dim 0: 0.5 to 0.6 is {step!s}, limit 0.0 (max_rate 1.0 per s for 0 ms)"
    )


def test_a_clock_read_back_allows_no_movement(clock) -> None:
    gate = SafetyGate(max_rate=RATE, on_delta="clip", clock=clock)
    gate.check([0.0])
    clock.advance(-10.0)
    assert float(gate.check([1.0])[0]) == 0.0


def test_in_a_loop_the_rate_is_measured_on_the_loops_clock(clock, observe, policy_type) -> None:
    """A 10 Hz loop whose chunk moves 1 a tick, under `max_rate=5` clipping: 0.5 a tick."""
    executor = ChunkExecutor(policy_type(horizon=100), clock=clock, monotonic=clock)
    executor.tick(observe)
    executor.join(5)
    gate = SafetyGate(max_rate=[5.0, 100.0], on_delta="clip")
    gate.reset([0.0, 1.0])
    applied = []
    loop = ControlLoop(
        observe=observe,
        executor=executor,
        apply_action=applied.append,
        rate_hz=10,
        gate=gate,
        sleep=clock.advance,
    )
    assert gate.clock is clock
    loop.run(ticks=4)
    assert [float(a[0]) for a in applied] == pytest.approx([0.0, 0.5, 1.0, 1.5])


def test_a_gate_built_with_another_clock_is_refused_by_the_loop(clock, policy_type) -> None:
    gate = SafetyGate(max_rate=RATE, clock=clock)
    with pytest.raises(ValueError) as caught:
        ControlLoop(
            observe=lambda: None,
            executor=ChunkExecutor(policy_type()),
            apply_action=lambda action: None,
            rate_hz=10,
            gate=gate,
        )
    assert str(caught.value) == (
        f"the gate runs on {clock!r}, the loop on time.monotonic: the rate would be measured "
        "across two clocks; give the gate the loop's clock, or no clock to take the loop's"
    )


def test_a_gate_used_alone_reads_the_monotonic_clock() -> None:
    gate = SafetyGate(max_rate=RATE, on_delta="clip")
    started = time.monotonic()
    gate.check([0.0])
    time.sleep(0.01)
    moved = float(gate.check([1.0])[0])
    elapsed = time.monotonic() - started
    assert gate.clock is None
    assert 0.01 * RATE - 1e-6 <= moved <= elapsed * RATE + 1e-6


def test_a_reference_set_before_the_loop_counts_from_the_loop(clock) -> None:
    gate = SafetyGate(max_rate=RATE, on_delta="clip")
    gate.reset([0.0])  # read on time.monotonic, not the fake clock
    gate.use_clock(clock)
    clock.advance(0.25)
    assert float(gate.check([1.0])[0]) == 0.25
    clock.advance(0.25)
    gate.use_clock(clock)  # a second loop on the same clock: the time since the last counts
    assert float(gate.check([1.0])[0]) == 0.5


@pytest.mark.parametrize(
    ("max_rate", "message"),
    [
        (-1.0, "max_rate must be >= 0"),
        ([1.0, -0.1], "max_rate must be >= 0"),
        (np.nan, "max_rate must not contain NaN"),
        (np.inf, "max_rate must be finite (units per second; leave it out for none)"),
    ],
)
def test_invalid_rates_are_refused(max_rate, message) -> None:
    with pytest.raises(ValueError) as caught:
        SafetyGate(max_rate=max_rate)
    assert str(caught.value) == message


def test_the_wall_clock_never_measures_the_rate() -> None:
    with pytest.raises(ValueError) as caught:
        SafetyGate(max_rate=RATE, clock=time.time)
    assert str(caught.value) == (
        "the gate's clock must be a monotonic clock (time.monotonic, or a fake one in tests), "
        "not the wall clock time.time, which can be set back or forward; a wall clock may only "
        "stamp frames (ChunkExecutor(clock=))"
    )
