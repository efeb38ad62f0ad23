"""OpenCVCamera driven through video-file paths: RGB frames, warm-up, stalls, reconnects.

OpenCV opens files through the same `VideoCapture` API as devices; a file that ends behaves like
a camera that stops producing frames, and deleting and re-creating it like one unplugged and
plugged back in.
"""

from __future__ import annotations

import os
import time

import numpy as np
import pytest
from camera_media import BLUE, GREEN, RED, WriteVideo, assert_timeline, close_to, dominant, solid

from timing import LATE_S
from vla_client.cameras import Camera, CameraError, CameraTimeoutError, Frame, OpenCVCamera, opencv

FAST = {"timeout_s": 0.5, "reconnect_delay_s": 0.2}


def drain(camera: OpenCVCamera, limit: int = 50) -> tuple[list[Frame], CameraTimeoutError]:
    """Read until the camera times out; return the frames read and the timeout error."""
    frames = []
    for _ in range(limit):
        try:
            frames.append(camera.read())
        except CameraTimeoutError as exc:
            return frames, exc
    raise AssertionError(f"camera kept producing frames after {limit} reads")


def test_frames_come_back_rgb_after_warmup(write_video: WriteVideo) -> None:
    path = write_video([solid(RED)] * 3 + [solid(BLUE)] * 5)
    with OpenCVCamera(path, warmup_frames=3, timeout_s=0.5, reconnect_delay_s=10) as camera:
        assert isinstance(camera, Camera)
        frames, _ = drain(camera)
    assert frames
    for frame in frames:
        assert frame.image.shape == (48, 64, 3)
        assert close_to(dominant(frame.image), BLUE), "warm-up frame or BGR order leaked"
    assert_timeline(frames)


def test_a_stalled_source_times_out_and_never_repeats_a_frame(write_video: WriteVideo) -> None:
    path = write_video([solid(GREEN)] * 4)
    with OpenCVCamera(path, warmup_frames=0, timeout_s=0.3, reconnect_delay_s=10) as camera:
        frames, error = drain(camera)
        started = time.monotonic()
        with pytest.raises(CameraTimeoutError, match=r"no new frame within 0\.3 s"):
            camera.read()
        waited = time.monotonic() - started
        with pytest.raises(CameraTimeoutError):
            camera.read(timeout=0.05)
    assert 1 <= len(frames) <= 4
    assert "last frame" in str(error)
    assert 0.25 <= waited < 0.3 + LATE_S  # its timeout, not the reconnect delay's 10 s
    assert_timeline(frames)


def test_a_source_that_disappears_and_returns_reconnects(write_video: WriteVideo) -> None:
    path = write_video([solid(RED)] * 6)
    with OpenCVCamera(path, warmup_frames=1, **FAST) as camera:
        os.remove(path)  # the open handle still plays to the end, then reopening fails
        before, error = drain(camera)
        assert "reconnecting" in str(error)
        replacement = write_video([solid(BLUE)] * 6, name="next.avi")
        os.replace(replacement, path)
        after = camera.read(timeout=3.0)
        later = [camera.read(timeout=3.0) for _ in range(2)]  # replays: files loop on reopen
    assert before and close_to(dominant(before[-1].image), RED)
    assert close_to(dominant(after.image), BLUE)
    assert_timeline([*before, after, *later])


def test_open_fails_clearly() -> None:
    with pytest.raises(CameraError, match="cannot open camera"):
        OpenCVCamera("/nonexistent/video.avi").open()
    with pytest.raises(CameraError, match="FOURCC"):
        OpenCVCamera(0, fourcc="MJPEG")


def test_a_size_the_device_does_not_give_is_an_error(write_video: WriteVideo) -> None:
    path = write_video([solid(RED)] * 3)
    with pytest.raises(CameraError, match=r"gives 64x48 .*not the requested 1280x720"):
        OpenCVCamera(path, width=1280, height=720).open()


def test_open_times_out_when_no_frame_survives_warmup(write_video: WriteVideo) -> None:
    path = write_video([solid(RED)] * 2)
    camera = OpenCVCamera(path, warmup_frames=5, timeout_s=0.3, reconnect_delay_s=10)
    with pytest.raises(CameraTimeoutError, match="gave no frame"):
        camera.open()
    with pytest.raises(CameraError, match="not open"):
        camera.read()


def test_reopening_keeps_sequence_numbers_increasing(write_video: WriteVideo) -> None:
    path = write_video([solid(GREEN)] * 3)
    camera = OpenCVCamera(path, warmup_frames=0, timeout_s=0.3, reconnect_delay_s=10)
    with camera:
        first = camera.read()
    with camera:
        second = camera.read()
    assert second.sequence > first.sequence
    assert second.monotonic_time > first.monotonic_time


def test_a_crashed_capture_thread_is_reported_not_mistaken_for_a_slow_camera(
    write_video: WriteVideo, monkeypatch: pytest.MonkeyPatch
) -> None:
    converted: list[np.ndarray] = []

    def convert_once(image: np.ndarray) -> np.ndarray:
        if converted:
            raise ValueError("unexpected pixel layout")
        converted.append(image)
        return image

    monkeypatch.setattr(opencv, "to_rgb", convert_once)
    path = write_video([solid(GREEN)] * 8)
    with OpenCVCamera(path, warmup_frames=0, timeout_s=0.3, reconnect_delay_s=10) as camera:
        assert camera.read().sequence == 0
        with pytest.raises(CameraTimeoutError, match=r"capture thread stopped.*pixel layout"):
            camera.read()
