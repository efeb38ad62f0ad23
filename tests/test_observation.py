import numpy as np
import pytest

from vla_client import InvalidObservationError, Observation


def test_frames_are_normalised_once(frames):
    grey = frames["wrist"][..., 0]
    obs = Observation({"wrist": grey, "left": frames["left"].astype(np.int64)}, state=[1, 2, 3])
    assert obs.images["wrist"].shape == (*grey.shape, 3)
    assert obs.images["left"].dtype == np.uint8
    assert obs.state is not None and obs.state.dtype == np.float32


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"images": {}}, "at least one camera"),
        ({"images": [np.zeros((4, 4, 3), np.uint8)]}, "dict"),
        ({"images": {"w": np.zeros((3, 64, 64), np.uint8)}}, "CHW"),
        ({"images": {"w": np.zeros((4, 4, 3), np.float32) + 2}}, r"\[0, 1\]"),
        ({"images": {"w": np.zeros((4, 4, 3), np.complex64)}}, "dtype"),
        ({"images": {"w": np.zeros((4, 4, 3), np.uint8)}, "state": [0.0, np.nan]}, "NaN"),
        ({"images": {"w": np.zeros((4, 4, 3), np.uint8)}, "state": [[1.0]]}, "1-D"),
        ({"images": {"w": np.zeros((4, 4, 3), np.uint8)}, "state": ["a"]}, "numeric"),
        (
            {"images": {"w": np.zeros((4, 4, 3), np.uint8)}, "capture_times": {"x": 1.0}},
            "unknown cameras",
        ),
        ({"images": {"": np.zeros((4, 4, 3), np.uint8)}}, "non-empty"),
    ],
)
def test_bad_observations_fail_before_sending(kwargs, message):
    with pytest.raises(InvalidObservationError, match=message):
        Observation(**kwargs)


@pytest.mark.parametrize(
    "bad", [float("nan"), float("inf"), -np.inf, np.float32("nan"), "1.5", True]
)
def test_capture_times_must_be_finite_numbers(bad):
    """A NaN capture time made the age check depend on dict order (`min` with NaN): one camera
    at NaN and one 10 s old passed `max_observation_age_s=0.1` when NaN came first."""
    frame = np.zeros((4, 4, 3), np.uint8)
    with pytest.raises(InvalidObservationError) as caught:
        Observation({"a": frame, "b": frame}, capture_times={"a": bad, "b": 1.0})
    assert str(caught.value) == (
        f"capture_times['a'] must be a finite number of seconds, got {bad!r}"
    )


def test_capture_times_of_any_real_number_type_become_floats():
    frame = np.zeros((4, 4, 3), np.uint8)
    times = {"a": 1, "b": np.float32(2.5), "c": np.int64(3)}
    obs = Observation(dict.fromkeys(times, frame), capture_times=times)
    assert obs.capture_times == {"a": 1.0, "b": 2.5, "c": 3.0}
    assert all(type(t) is float for t in obs.capture_times.values())
    assert obs.oldest_capture_time == 1.0
