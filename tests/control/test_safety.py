"""SafetyGate: what never reaches the robot, and what is clipped on the way."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vla_client.control import SafetyGate, UnsafeActionError
from vla_client.errors import VLAClientError
from vla_client.protocol import ActionMetadata

METADATA = {"output": {"action_horizon": 4, "action_dim": 3}}


def test_unsafe_action_error_is_a_client_error():
    assert issubclass(UnsafeActionError, VLAClientError)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_action_is_rejected_even_when_clipping(bad):
    gate = SafetyGate(low=-1, high=1, on_bounds="clip")
    with pytest.raises(UnsafeActionError, match="non-finite"):
        gate.check([0.0, bad, 0.0])
    assert gate.rejected == 1
    assert gate.last_action is None


@pytest.mark.parametrize("action", [[0.0, 0.0], [0.0] * 4, [[0.0, 0.0, 0.0]]])
def test_action_of_the_wrong_shape_is_rejected(action):
    gate = SafetyGate.from_metadata(METADATA)
    with pytest.raises(UnsafeActionError, match="shape"):
        gate.check(action)


def test_from_metadata_reads_horizon_and_dim():
    gate = SafetyGate.from_metadata(METADATA, max_delta=0.5)
    assert (gate.horizon, gate.action_dim) == (4, 3)
    assert np.array_equal(gate.check([0.1, 0.2, 0.3]), np.float32([0.1, 0.2, 0.3]))
    assert (SafetyGate.from_metadata({}).horizon, SafetyGate.from_metadata({}).action_dim) == (
        None,
        None,
    )


def test_from_metadata_takes_the_clients_metadata_model():
    gate = SafetyGate.from_metadata(ActionMetadata.model_validate(METADATA))
    assert (gate.horizon, gate.action_dim) == (4, 3)


@pytest.mark.parametrize("shape", [(5, 3), (4, 2), (4,), (1, 4, 3)])
def test_chunk_of_the_wrong_shape_is_rejected(shape):
    gate = SafetyGate.from_metadata(METADATA)
    with pytest.raises(UnsafeActionError, match="shape"):
        gate.check_chunk(np.zeros(shape, np.float32))


def test_chunk_check_passes_a_good_chunk_and_rejects_nan():
    gate = SafetyGate.from_metadata(METADATA)
    chunk = np.zeros((4, 3), np.float32)
    gate.check_chunk(chunk)
    chunk[2, 1] = np.nan
    with pytest.raises(UnsafeActionError, match="non-finite"):
        gate.check_chunk(chunk)


def test_bounds_clip_per_dimension():
    gate = SafetyGate(low=[-1, -2, 0], high=[1, 2, 0.5], on_bounds="clip")
    assert np.array_equal(gate.check([5.0, -5.0, 0.25]), np.float32([1, -2, 0.25]))
    assert gate.clipped == 1
    assert np.array_equal(gate.check([0.5, 0.5, 0.25]), np.float32([0.5, 0.5, 0.25]))
    assert gate.clipped == 1


def test_bounds_reject_names_the_dimension():
    gate = SafetyGate(low=-1.0, high=1.0)
    with pytest.raises(UnsafeActionError, match="dim 2"):
        gate.check([0.0, 0.5, 1.5])
    assert gate.rejected == 1


def test_delta_is_limited_relative_to_the_last_passed_action():
    gate = SafetyGate(max_delta=[0.1, 1.0], on_delta="clip")
    assert np.array_equal(gate.check([0.0, 0.0]), np.float32([0.0, 0.0]))  # first: no reference
    assert np.allclose(gate.check([1.0, 0.5]), [0.1, 0.5])
    assert np.allclose(gate.check([1.0, -2.0]), [0.2, -0.5])
    assert np.allclose(gate.last_action, [0.2, -0.5])


def test_delta_reject_and_reset():
    gate = SafetyGate(max_delta=0.1)
    gate.check([0.0])
    with pytest.raises(UnsafeActionError, match="step too large"):
        gate.check([0.5])
    gate.reset([0.45])
    assert np.allclose(gate.check([0.5]), [0.5])
    gate.reset()
    assert np.allclose(gate.check([-3.0]), [-3.0])


def test_step_within_the_limit_passes_unchanged_despite_float_rounding():
    last, action = np.float32([0.2739233672618866]), np.float32([-0.46042656898498535])
    assert last + (action - last) != action  # reconstructing the action from its step rounds
    gate = SafetyGate(max_delta=0.8)
    gate.reset(last)
    assert np.array_equal(gate.check(action), action)
    assert gate.clipped == gate.rejected == 0


def test_invalid_limits_are_refused():
    with pytest.raises(ValueError):
        SafetyGate(low=1.0, high=0.0)
    with pytest.raises(ValueError):
        SafetyGate(max_delta=-0.1)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.lists(st.floats(-10, 10, allow_nan=False, width=32), min_size=2, max_size=2),
        min_size=1,
        max_size=8,
    )
)
def test_clipped_actions_stay_within_bounds_and_step_limits(actions):
    gate = SafetyGate(low=-1, high=[1, 2], on_bounds="clip", max_delta=0.3, on_delta="clip")
    previous = None
    for action in actions:
        passed = gate.check(action)
        assert (passed >= -1).all() and (passed <= np.float32([1, 2])).all()
        if previous is not None:
            assert (np.abs(passed - previous) <= 0.3 + 1e-6).all()
        previous = passed


@pytest.mark.parametrize("option", ["on_bounds", "on_delta"])
@pytest.mark.parametrize("value", ["raise", "halt", "Reject", "", None, 1])
def test_an_unknown_violation_mode_is_refused_naming_the_choices(option, value):
    with pytest.raises(ValueError, match=rf"{option} must be one of 'clip', 'reject'; got"):
        SafetyGate(action_dim=3, low=-1, high=1, max_delta=0.5, **{option: value})


def test_a_gate_told_to_stop_never_clips():
    gate = SafetyGate(action_dim=3, low=-1, high=1, on_bounds="reject")
    with pytest.raises(UnsafeActionError, match="outside bounds"):
        gate.check([2.0, 0.0, 0.0])
    assert gate.clipped == 0


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"action_dim": 0}, "action_dim must be a positive integer"),
        ({"action_dim": 2.5}, "action_dim must be a positive integer"),
        ({"horizon": -1}, "horizon must be a positive integer"),
        ({"low": np.nan}, "low must not contain NaN"),
        ({"high": [1.0, np.nan, 1.0]}, "high must not contain NaN"),
        ({"max_delta": np.nan}, "max_delta must not contain NaN"),
        ({"action_dim": 3, "low": [-1.0, -1.0]}, r"low must be a number or one value per dim"),
        ({"high": [[1.0]]}, r"high must be a number or one value per dim"),
    ],
)
def test_invalid_sizes_and_limits_are_refused(options, message):
    with pytest.raises(ValueError, match=message):
        SafetyGate(**options)
