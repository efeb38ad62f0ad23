"""CameraRig: synchronised captures, skew, stale-frame refusal, errors named by camera."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from types import SimpleNamespace

import cv2
import numpy as np
import pytest
from camera_media import BLUE, GREEN, WriteVideo, assert_timeline, close_to, dominant, solid

from vla_client.cameras import (
    CameraBase,
    CameraError,
    CameraRig,
    CameraTimeoutError,
    Frame,
    ImageFolderCamera,
    StaleFrameError,
    SyntheticCamera,
    VideoFileCamera,
)
from vla_client.client.fit import FramePreprocessor
from vla_client.errors import CameraSettingError


class FixedCamera(CameraBase):
    """A camera whose frames are `age_s` old when retrieved, or that fails as told.

    Each `grab` and `retrieve` is written to `calls` as ``("grab", source)`` or
    ``("retrieve", source)``; cameras given one list show the order the rig used them in.
    `captured_at`, when given, is the frame's capture time instead of now minus `age_s`.
    """

    def __init__(
        self,
        age_s: float = 0.0,
        open_error: CameraError | None = None,
        read_error: CameraError | None = None,
        *,
        source: str = "fixed",
        calls: list[tuple[str, str]] | None = None,
        captured_at: float | None = None,
    ) -> None:
        self.source = source
        self.age_s = age_s
        self.open_error, self.read_error = open_error, read_error
        self.opened = False
        self.sequence = 0
        self.calls = [] if calls is None else calls
        self.captured_at = captured_at
        self.timeouts: list[float | None] = []

    def open(self) -> None:
        if self.open_error is not None:
            raise self.open_error
        self.opened = True

    def close(self) -> None:
        self.opened = False

    def grab(self) -> None:
        self.calls.append(("grab", self.source))

    def retrieve(self, timeout: float | None = None) -> Frame:
        self.calls.append(("retrieve", self.source))
        self.timeouts.append(timeout)
        if self.read_error is not None:
            raise self.read_error
        self.sequence += 1
        taken = time.monotonic() - self.age_s if self.captured_at is None else self.captured_at
        return Frame(solid(GREEN), self.sequence, taken, time.time() - self.age_s)


def synthetic_rig(**options: object) -> CameraRig:
    cameras = {
        name: SyntheticCamera(seed=i, width=64, height=48, fps=60)
        for i, name in enumerate(("wrist", "left", "right"))
    }
    return CameraRig(cameras, **options)  # type: ignore[arg-type]


def test_capture_builds_an_observation_with_capture_times_and_skew() -> None:
    with synthetic_rig() as rig:
        captures = [rig.capture(task="pick", state=[0.5, 1.0]) for _ in range(5)]
    for capture in captures:
        observation = capture.observation
        assert set(observation.images) == {"wrist", "left", "right"}
        assert observation.task == "pick"
        np.testing.assert_array_equal(observation.state, [0.5, 1.0])
        times = {name: frame.monotonic_time for name, frame in capture.frames.items()}
        assert observation.capture_times == times
        assert capture.skew_s == pytest.approx(max(times.values()) - min(times.values()))
        assert 0 <= capture.skew_s < 1 / 60
    for name in ("wrist", "left", "right"):
        assert_timeline([capture.frames[name] for capture in captures])


def test_rig_paces_to_the_cameras_rate() -> None:
    with synthetic_rig() as rig:
        rig.capture()
        started = time.monotonic()
        for _ in range(6):
            rig.capture()
        rate = 6 / (time.monotonic() - started)
    assert 40 < rate < 75


def test_stream_yields_fresh_captures() -> None:
    with synthetic_rig() as rig:
        stream = rig.stream(task="wave")
        first, second = next(stream), next(stream)
    assert second.observation.task == "wave"
    assert all(second.frames[n].sequence > first.frames[n].sequence for n in first.frames)


def test_every_camera_is_grabbed_before_any_is_retrieved() -> None:
    calls: list[tuple[str, str]] = []
    names = ("wrist", "left", "right")
    rig = CameraRig({name: FixedCamera(source=name, calls=calls) for name in names})
    with rig:
        rig.capture()
        assert calls == [("grab", name) for name in names] + [("retrieve", n) for n in names]
        calls.clear()
        next(rig.stream())
    assert calls == [("grab", name) for name in names] + [("retrieve", n) for n in names]


EPS = 2.0**-46  # the spacing of floats between 64 and 128


@pytest.mark.parametrize(
    ("age", "refused"), [(0.25 - EPS, False), (0.25, False), (0.25 + EPS, True)],
    ids=["just-under", "at", "just-over"],
)  # fmt: skip
def test_a_frame_exactly_max_age_old_is_taken(
    monkeypatch: pytest.MonkeyPatch, age: float, refused: bool
) -> None:
    """On a clock the test sets (the rig's only): 100.0 now, frames captured `age` before."""
    import vla_client.cameras.rig as rig_module

    monkeypatch.setattr(rig_module, "time", SimpleNamespace(monotonic=lambda: 100.0))
    assert 100.0 - (100.0 - age) == age
    cameras = {"wrist": FixedCamera(captured_at=100.0), "left": FixedCamera(captured_at=100 - age)}
    with CameraRig(cameras, max_age_s=0.25) as rig:  # type: ignore[arg-type]
        if refused:
            with pytest.raises(StaleFrameError, match="left"):
                rig.capture()
        else:
            assert rig.capture().skew_s == age


@pytest.fixture
def rig_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rig reads the time 100.0 (its own clock only)."""
    import vla_client.cameras.rig as rig_module

    monkeypatch.setattr(rig_module, "time", SimpleNamespace(monotonic=lambda: 100.0))


def test_the_stale_message_names_each_stale_camera_and_its_age(rig_clock: None) -> None:
    cameras = {
        "wrist": FixedCamera(captured_at=98.5),
        "fresh": FixedCamera(captured_at=100.0),
        "left": FixedCamera(captured_at=97.75),
    }
    rig = CameraRig(cameras, max_age_s=1.0)  # type: ignore[arg-type]
    with rig, pytest.raises(StaleFrameError) as caught:
        rig.capture()
    assert str(caught.value) == "frames older than 1000 ms: wrist 1500 ms, left 2250 ms"


def test_each_capture_is_logged_with_ages_and_skew(rig_clock: None, caplog) -> None:
    caplog.set_level(logging.DEBUG, logger="vla_client.cameras.rig")
    cameras = {"a": FixedCamera(captured_at=99.875), "b": FixedCamera(captured_at=100.0)}
    with CameraRig(cameras) as rig:  # type: ignore[arg-type]
        rig.capture()
    assert [r.getMessage() for r in caplog.records] == [
        "captured a #1 age 125.0 ms, b #1 age 0.0 ms; skew 125.0 ms"
    ]


def test_defaults_max_age_no_timeout_no_task_no_state() -> None:
    camera = FixedCamera(age_s=0.15)
    with CameraRig({"a": camera}) as rig:
        assert rig.max_age_s == 0.2 and rig.timeout_s is None
        capture = rig.capture()
        assert capture.observation.task == "" and capture.observation.state is None
        assert next(rig.stream()).observation.task == ""
    assert camera.timeouts == [None, None]
    with CameraRig({"a": FixedCamera(age_s=0.25)}) as rig, pytest.raises(StaleFrameError):
        rig.capture()


def test_the_timeout_reaches_every_camera() -> None:
    cameras = {"a": FixedCamera(), "b": FixedCamera()}
    with CameraRig(cameras, timeout_s=0.7) as rig:
        rig.capture(task="t")
    assert cameras["a"].timeouts == cameras["b"].timeouts == [0.7]


def test_frames_older_than_max_age_are_refused() -> None:
    rig = CameraRig({"wrist": FixedCamera(), "left": FixedCamera(age_s=0.5)}, max_age_s=0.1)
    with rig, pytest.raises(StaleFrameError, match=r"older than 100 ms: left 50\d ms"):
        rig.capture()


def test_camera_errors_name_the_camera() -> None:
    stalled = FixedCamera(read_error=CameraTimeoutError("no new frame"))
    rig = CameraRig({"wrist": FixedCamera(), "left": stalled})
    with rig, pytest.raises(CameraTimeoutError, match="camera 'left': no new frame"):
        rig.capture()


def test_a_failed_open_closes_the_cameras_already_open() -> None:
    good, bad = FixedCamera(), FixedCamera(open_error=CameraError("unplugged"))
    with pytest.raises(CameraError, match="unplugged"):
        CameraRig({"a": good, "b": bad}).open()
    assert not good.opened
    with pytest.raises(CameraError, match=r"^a camera rig needs at least one camera$"):
        CameraRig({})


def test_rig_mixes_files_folders_and_synthetic(write_video: WriteVideo, tmp_path: Path) -> None:
    folder = tmp_path / "frames"
    folder.mkdir()
    cv2.imwrite(str(folder / "0.png"), cv2.cvtColor(solid(GREEN), cv2.COLOR_RGB2BGR))
    cameras = {
        "wrist": VideoFileCamera(write_video([solid(BLUE)] * 4), fps=50),
        "left": ImageFolderCamera(folder, fps=50),
        "right": SyntheticCamera(width=64, height=48, fps=50),
    }
    with CameraRig(cameras) as rig:
        capture = rig.capture()
    images = capture.observation.images
    assert close_to(dominant(images["wrist"]), BLUE)
    assert close_to(dominant(images["left"]), GREEN)
    assert images["right"].shape == (48, 64, 3)
    assert capture.skew_s < 1 / 50


def test_preprocessor_maps_names_sizes_and_capture_times() -> None:
    metadata = {"input": {"image_keys": ["base_0_rgb", "left_wrist_0_rgb"], "image_size": [32, 32]}}
    names = {"wrist": "left_wrist_0_rgb", "left": "base_0_rgb"}
    cameras = {"wrist": SyntheticCamera(width=64, height=48), "left": SyntheticCamera(seed=1)}
    rig = CameraRig(cameras, preprocessor=FramePreprocessor.from_metadata(metadata, names))
    with rig:
        capture = rig.capture()
    observation = capture.observation
    assert set(observation.images) == {"base_0_rgb", "left_wrist_0_rgb"}
    assert all(image.shape == (32, 32, 3) for image in observation.images.values())
    assert observation.capture_times["left_wrist_0_rgb"] == capture.frames["wrist"].monotonic_time
    assert capture.frames["wrist"].image.shape == (48, 64, 3)  # raw frames stay as captured


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_age_s": 0}, "max_age_s must be a number > 0; got 0"),
        ({"timeout_s": -1.0}, "timeout_s must be a number > 0; got -1.0"),
        ({"timeout_s": "1"}, "timeout_s must be a number > 0; got '1'"),
        ({"preprocessor": 3}, "preprocessor must be callable; got 3"),
    ],
)
def test_a_rig_option_that_cannot_work_is_a_camera_setting_error(options, message) -> None:
    cameras = {"wrist": FixedCamera(source="wrist", calls=[])}
    with pytest.raises(CameraSettingError) as caught:
        CameraRig(cameras, **options)  # type: ignore[arg-type]
    assert str(caught.value) == message


def test_a_rig_takes_no_timeout() -> None:
    rig = CameraRig({"wrist": FixedCamera(source="wrist", calls=[])}, timeout_s=None)
    assert rig.timeout_s is None
