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


def test_depth_frames_keep_their_dtype_and_values_apart_from_images():
    """uint16 millimetres and float32 metres stay as given (NaN too), HxWx1 becomes HxW, big
    endian becomes native; the colour frames are what they always were."""
    millimetres = np.arange(12, dtype=np.uint16).reshape(3, 4) * 5000
    metres = np.full((3, 4, 1), np.nan, ">f4")
    obs = Observation(
        {"front": np.zeros((3, 4, 3), np.uint8)},
        depth={"mm": millimetres, "m": metres},
        capture_times={"front": 1.0, "mm": 2.0},
    )
    assert obs.depth["mm"].dtype == np.uint16 and obs.depth["mm"].tobytes() == millimetres.tobytes()
    assert obs.depth["m"].shape == (3, 4) and obs.depth["m"].dtype.isnative
    assert obs.depth["m"].tobytes() == metres[:, :, 0].astype("<f4").tobytes()
    assert list(obs.images) == ["front"] and obs.capture_times == {"front": 1.0, "mm": 2.0}
    assert Observation({}, depth={"mm": millimetres}).images == {}  # depth alone is a camera


@pytest.mark.parametrize(
    ("depth", "message"),
    [
        ({"d": np.zeros((4, 4), np.float64)},
         "depth frames are uint16 (millimetres) or float32 (metres), got float64; convert it "
         "yourself (a depth value is never rescaled here)"),
        ({"d": np.zeros((4, 4), np.uint8)},
         "depth frames are uint16 (millimetres) or float32 (metres), got uint8; convert it "
         "yourself (a depth value is never rescaled here)"),
        ({"d": np.zeros((4, 4, 3), np.uint16)},
         "depth frame must be HxW (or HxWx1), got shape (4, 4, 3)"),
        ({"d": np.zeros((0, 4), np.uint16)}, "depth frame has a zero-size dimension: (0, 4)"),
        ({"front": np.zeros((4, 4), np.uint16)}, "cameras ['front'] are in both images and depth"),
        ([np.zeros((4, 4), np.uint16)], "depth must be a dict of camera name to depth frame, "
         "got list"),
    ],
)  # fmt: skip
def test_depth_that_is_not_depth_is_refused_never_converted(depth, message):
    with pytest.raises(InvalidObservationError) as refused:
        Observation({"front": np.zeros((4, 4, 3), np.uint8)}, depth=depth)
    assert str(refused.value).removeprefix("depth.d: ") == message
