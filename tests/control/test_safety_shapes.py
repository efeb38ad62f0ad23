"""The safety gate never reshapes an action: its dimension is fixed once, and any other shape is
refused in every mode.

numpy would stretch a 1-value action over 7 joints (`np.clip([0.8], -ones(7), ones(7))` is
``[0.8] * 7``): a server answering ``[16, 1]`` chunks once drove 59 such actions into a robot.
The gate's dimension comes from `action_dim`, else its limits' length, else the first action
or chunk it checks, and from then on an action or chunk of another shape is an
`UnsafeActionError` naming both shapes, whether the gate clips or rejects.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from vla_client.control import SafetyGate, UnsafeActionError

SEVEN = np.ones(7, np.float32)


@pytest.mark.parametrize("action", [[0.8], [1.0, 2.0, 3.0], [0.0] * 8, [[0.8] * 7]])
@pytest.mark.parametrize("on_bounds", ["clip", "reject"])
def test_bounds_never_stretch_or_trim_an_action(action: list[float], on_bounds: str) -> None:
    gate = SafetyGate(low=-SEVEN, high=SEVEN, on_bounds=on_bounds)  # type: ignore[arg-type]
    shape = str(list(np.shape(action)))
    with pytest.raises(UnsafeActionError) as caught:
        gate.check(action)
    assert str(caught.value) == (
        f"action shape {shape}, expected [7] (action dim from the length of low)"
    )
    assert (gate.rejected, gate.clipped, gate.last_action) == (1, 0, None)


@pytest.mark.parametrize("on_delta", ["clip", "reject"])
def test_the_first_action_fixes_the_dimension_of_the_step_limit(on_delta: str) -> None:
    gate = SafetyGate(max_delta=0.5, on_delta=on_delta)  # type: ignore[arg-type]
    gate.check(np.zeros(7))
    assert gate.action_dim == 7
    with pytest.raises(UnsafeActionError, match=r"^action shape \[1\], expected \[7\] \(action "
                       r"dim from the first action\)$"):  # fmt: skip
        gate.check([0.8])
    assert gate.last_action is not None and gate.last_action.tolist() == [0.0] * 7


def test_a_gate_from_metadata_without_a_dim_takes_it_from_its_limits() -> None:
    gate = SafetyGate.from_metadata({"output": {"action_horizon": 16}}, low=-SEVEN, high=SEVEN)
    assert (gate.horizon, gate.action_dim) == (16, 7)
    with pytest.raises(UnsafeActionError) as caught:
        gate.check_chunk(np.full((16, 1), 0.8, np.float32))
    assert str(caught.value) == (
        "chunk shape [16, 1], expected [16, 7] (action dim from the length of low)"
    )
    assert gate.rejected == 1
    gate.check_chunk(np.zeros((16, 7), np.float32))


def test_vector_limits_of_different_lengths_are_refused() -> None:
    with pytest.raises(ValueError) as caught:
        SafetyGate(low=[-1.0], high=SEVEN)
    assert str(caught.value) == (
        "high must be a number or one value per dimension (1); got shape (7,)"
    )
    with pytest.raises(ValueError, match=r"^max_delta must be a number or one value per dim"):
        SafetyGate(high=SEVEN, max_delta=[0.1, 0.1])
    with pytest.raises(ValueError, match=r"^low must be a number or one value per dim"):
        SafetyGate(low=[])


def test_a_scalar_limit_applies_to_every_dimension_once_it_is_known() -> None:
    gate = SafetyGate(low=-1.0, high=[1.0, 2.0, 3.0], on_bounds="clip")
    assert gate.check([-5.0, 5.0, 5.0]).tolist() == [-1.0, 2.0, 3.0]
    gate = SafetyGate(high=0.5, on_bounds="clip")
    assert gate.check([1.0, 0.0]).tolist() == [0.5, 0.0]
    with pytest.raises(UnsafeActionError, match=r"expected \[2\]"):
        gate.check([1.0])


def test_a_rejection_names_the_real_dimension_value_and_limit() -> None:
    gate = SafetyGate(low=[-1.0, -0.5, -1.0], high=[1.0, 0.5, 1.0])
    with pytest.raises(UnsafeActionError) as caught:
        gate.check([0.9, -0.7, 0.3])
    assert str(caught.value) == "outside bounds at dim 1: -0.7, limit -0.5"
    gate = SafetyGate(max_delta=[1.0, 0.1])
    gate.reset([0.0, 0.25])
    with pytest.raises(UnsafeActionError) as caught:
        gate.check([0.5, 0.5])
    assert str(caught.value) == "step too large at dim 1: 0.25 to 0.5 is 0.25, limit 0.1"


@pytest.mark.parametrize(
    "action",
    [["0.1", "0.2"], [True, False], [[0.1], [0.1, 0.2]], [1 + 2j, 0.0], "0.5", None],
    ids=["strings", "booleans", "ragged", "complex", "a string", "None"],
)
def test_anything_but_an_array_of_numbers_is_refused(action: object) -> None:
    gate = SafetyGate(action_dim=2, low=-1.0, high=1.0, on_bounds="clip")
    with pytest.raises(UnsafeActionError, match=r"^action is not an array of numbers"):
        gate.check(action)  # type: ignore[arg-type]
    with pytest.raises(UnsafeActionError, match=r"^chunk is not an array of numbers"):
        gate.check_chunk([action])  # type: ignore[list-item]
    assert gate.rejected == 2 and gate.action_dim == 2


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_a_non_finite_reference_action_is_refused(bad: float) -> None:
    """A NaN reference turned the step limit off: every comparison with NaN is False."""
    gate = SafetyGate(max_delta=0.1)
    gate.reset(np.zeros(7))
    with pytest.raises(UnsafeActionError, match=r"^non-finite values .* in the reference action$"):
        gate.reset(np.full(7, bad))
    assert gate.last_action is not None and gate.last_action.tolist() == [0.0] * 7  # kept
    with pytest.raises(UnsafeActionError, match=r"^step too large at dim 0"):
        gate.check(np.full(7, 100.0))


def test_a_reference_action_must_have_the_gates_dimension() -> None:
    gate = SafetyGate(action_dim=7, max_delta=0.1)
    with pytest.raises(UnsafeActionError, match=r"^reference action shape \[1\], expected \[7\]"):
        gate.reset([0.0])
    fresh = SafetyGate(max_delta=0.1)
    fresh.reset([0.0, 0.0])  # the reference fixes the dimension
    assert fresh.action_dim == 2 and fresh.rejected == 0
    with pytest.raises(UnsafeActionError, match=r"expected \[2\] \(action dim from the first "
                       r"reference action\)"):  # fmt: skip
        fresh.check([0.05])


MODES = st.sampled_from(["clip", "reject"])
SOURCES = st.sampled_from(["action_dim", "low", "high", "max_delta", "first action", "reset"])


def shapes(max_dims: int = 3) -> st.SearchStrategy[tuple[int, ...]]:
    return st.lists(st.integers(0, 9), max_size=max_dims).map(tuple)


@settings(max_examples=300, deadline=None)
@given(
    data=st.data(),
    dim=st.integers(1, 8),
    horizon=st.none() | st.integers(1, 6),
    source=SOURCES,
    on_bounds=MODES,
    on_delta=MODES,
)
def test_no_action_or_chunk_of_another_shape_passes_in_any_mode(
    data: st.DataObject, dim: int, horizon: int | None, source: str, on_bounds: str, on_delta: str
) -> None:
    options: dict[str, object] = {"low": -1.0, "high": 1.0, "max_delta": 0.5}
    if source == "action_dim":
        options["action_dim"] = dim
    elif source in options:
        options[source] = np.full(dim, options[source], np.float32)
    gate = SafetyGate(horizon=horizon, on_bounds=on_bounds, on_delta=on_delta, **options)  # type: ignore[arg-type]
    if source == "reset":
        gate.reset(np.zeros(dim))
    elif source == "first action" or data.draw(st.booleans(), label="an action passed first"):
        gate.check(np.zeros(dim))  # and the step limit then has a reference
    before = (gate.last_action, gate.clipped, gate.rejected)
    values = st.floats(-3, 3, width=32)

    action = data.draw(arrays(np.float32, shapes().filter(lambda s: s != (dim,)), elements=values))
    with pytest.raises(UnsafeActionError) as caught:
        gate.check(action)
    assert str(caught.value).startswith(f"action shape {list(action.shape)}, expected [{dim}]")

    def fits(shape: tuple[int, ...]) -> bool:
        return len(shape) == 2 and shape[0] in ((horizon,) if horizon else range(1, 10))

    chunk = data.draw(arrays(np.float32, shapes().filter(lambda s: not (fits(s) and s[1] == dim)),
                             elements=values))  # fmt: skip
    with pytest.raises(UnsafeActionError) as caught:
        gate.check_chunk(chunk)
    expected = f"[{horizon or 'any'}, {dim}]"
    assert str(caught.value).startswith(f"chunk shape {list(chunk.shape)}, expected {expected}")
    assert (gate.last_action is before[0], gate.clipped, gate.rejected) == (
        True, before[1], before[2] + 2)  # fmt: skip

    # An action of the right shape is passed (maybe clipped) or refused for its values only.
    right = data.draw(arrays(np.float32, (dim,), elements=values))
    try:
        passed = gate.check(right)
    except UnsafeActionError as refused:
        assert str(refused).startswith(("outside bounds at dim", "step too large at dim"))
        assert "reject" in (on_bounds, on_delta)
    else:
        assert passed.shape == (dim,) and passed.dtype == np.float32
        assert (np.abs(passed) <= 1).all()
