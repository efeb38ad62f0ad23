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
