"""SafetyGate at its edges: limits met exactly, float32 rounding, one-sided bounds, counters.

A gate compares float32 actions with its limits. A limit kept in float64 (0.7 is not a float32)
would refuse the very action the limit names, and a step exactly at `max_delta` rebuilt as
``last + max_delta`` can differ from the action by a rounding; both must pass unchanged.
"""

from __future__ import annotations

import numpy as np
import pytest

from vla_client.control import SafetyGate, UnsafeActionError

# float32 values: last + (action - last) rounds to something other than the action.
LAST, ACTION = 0.2739233672618866, -0.46042656898498535


@pytest.mark.parametrize("value", [0.1, 0.7, -0.3, 1e-3])
def test_an_action_exactly_at_a_bound_passes_unchanged(value: float) -> None:
    for gate in (SafetyGate(low=[value]), SafetyGate(high=[value]), SafetyGate(low=[value],
                 high=[value])):  # fmt: skip
        passed = gate.check([value])
        assert passed.dtype == np.float32 and passed[0] == np.float32(value)
        assert gate.clipped == gate.rejected == 0


@pytest.mark.parametrize("limit", [0.1, 0.7])
def test_a_step_exactly_at_max_delta_passes_unchanged(limit: float) -> None:
    gate = SafetyGate(max_delta=[limit])
    gate.reset([0.0])
    assert gate.check([limit])[0] == np.float32(limit)
    step = float(np.float32(ACTION) - np.float32(LAST))
    assert np.float32(LAST) + np.float32(step) != np.float32(ACTION)  # the rounding is real
    gate = SafetyGate(max_delta=[abs(step)])
    gate.reset([LAST])
    assert gate.check([ACTION])[0] == np.float32(ACTION)
    assert gate.clipped == gate.rejected == 0


@pytest.mark.parametrize(("low", "high"), [([-1.0], None), (None, [1.0])])
def test_a_single_bound_is_enforced(low: list[float] | None, high: list[float] | None) -> None:
    gate = SafetyGate(low=low, high=high)
    outside = [-2.0] if low is not None else [2.0]
    with pytest.raises(UnsafeActionError, match=r"outside bounds at dim 0"):
        gate.check(outside)
    clipping = SafetyGate(low=low, high=high, on_bounds="clip")
    assert clipping.check(outside).tolist() == (low or high)
    assert clipping.check([0.0]).tolist() == [0.0]


def test_equal_low_and_high_pin_a_dimension() -> None:
    gate = SafetyGate(low=[1.0, -1.0], high=[1.0, 1.0], on_bounds="clip")
    assert gate.check([3.0, 0.5]).tolist() == [1.0, 0.5]
    with pytest.raises(ValueError, match=r"^low must not exceed high$"):
        SafetyGate(low=[1.0], high=[0.5])


def test_a_zero_max_delta_allows_no_movement() -> None:
    gate = SafetyGate(max_delta=0.0)
    gate.reset([0.25])
    assert gate.check([0.25]).tolist() == [0.25]
    with pytest.raises(UnsafeActionError, match="step too large at dim 0"):
        gate.check([0.26])
    with pytest.raises(ValueError, match=r"^max_delta must be >= 0$"):
        SafetyGate(max_delta=-0.1)


def test_reset_sets_the_last_action_for_the_delta_check() -> None:
    gate = SafetyGate(max_delta=0.1, on_delta="clip")
    gate.reset([0.5, -0.5])
    assert gate.last_action is not None and gate.last_action.dtype == np.float32
    assert gate.last_action.tolist() == [0.5, -0.5]
    assert gate.check([1.0, -0.5]).tolist() == pytest.approx([0.6, -0.5])
    gate.reset()
    assert gate.last_action is None
    assert gate.check([5.0, 5.0]).tolist() == [5.0, 5.0]  # nothing to step from


def test_rejections_name_the_worst_dimension_and_are_counted() -> None:
    gate = SafetyGate(low=[-1.0, -1.0], high=[1.0, 0.1])
    # Dim 0 is large but inside; dim 1 is small but over its bound.
    with pytest.raises(UnsafeActionError, match=r"^outside bounds at dim 1: 0\.2, limit 0\.1$"):
        gate.check([-0.9, 0.2])
    with pytest.raises(
        UnsafeActionError, match=r"^non-finite values \(NaN or infinity\) in the action$"
    ):
        gate.check([np.nan, 0.0])
    assert gate.rejected == 2


def test_clips_are_counted_and_stay_float32() -> None:
    gate = SafetyGate(low=[-1.0], high=[1.0], on_bounds="clip")
    for value in (2.0, -3.0):
        clipped = gate.check([value])
        assert clipped.dtype == np.float32
    assert gate.clipped == 2 and gate.rejected == 0


def test_from_metadata_passes_the_other_options_on() -> None:
    metadata = {"output": {"action_horizon": 4, "action_dim": 1}}
    gate = SafetyGate.from_metadata(metadata, low=[0.0], high=[1.0])
    with pytest.raises(UnsafeActionError, match="outside bounds"):
        gate.check([2.0])


def test_a_limit_of_the_wrong_shape_says_what_it_must_be() -> None:
    with pytest.raises(ValueError) as caught:
        SafetyGate(low=[[0.0, 1.0]])
    assert str(caught.value) == (
        "low must be a number or one value per dimension (any); got shape (1, 2)"
    )
    with pytest.raises(ValueError) as caught:
        SafetyGate(action_dim=3, max_delta=[0.1, 0.2])
    assert str(caught.value) == (
        "max_delta must be a number or one value per dimension (3); got shape (2,)"
    )
