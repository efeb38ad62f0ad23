"""Synthetic, image-folder and video-file cameras: content, RGB order, pacing, loops, timestamps."""

from __future__ import annotations

import time
from pathlib import Path

import cv2
import numpy as np
import pytest
from camera_media import BLUE, GREEN, RED, WriteVideo, assert_timeline, close_to, dominant, solid

from vla_client.cameras import (
    Camera,
    CameraError,
    Frame,
    ImageFolderCamera,
    SyntheticCamera,
    VideoFileCamera,
)
from vla_client.cameras.scene import SyntheticScene


def read_n(camera: Camera, count: int) -> list[Frame]:
    return [camera.read() for _ in range(count)]


def test_synthetic_camera_is_the_scene_paced_and_timestamped() -> None:
    with SyntheticCamera(seed=3, width=96, height=64, fps=50) as camera:
        assert isinstance(camera, Camera)
        started = time.monotonic()
        frames = read_n(camera, 6)
        elapsed = time.monotonic() - started
    scene = SyntheticScene(64, 96, seed=3)
    for frame in frames:
        assert frame.image.shape == (64, 96, 3) and frame.image.dtype == np.uint8
        np.testing.assert_array_equal(frame.image, scene.render(frame.sequence))
    assert [f.sequence for f in frames] == list(range(frames[0].sequence, frames[0].sequence + 6))
    assert_timeline(frames)
    assert elapsed >= 4 / 50  # paced: six consecutive frames at 50 fps span at least 5 periods
    assert abs(frames[-1].wall_time - time.time()) < 1.0


def test_late_reader_skips_frames_and_gets_the_newest() -> None:
    with SyntheticCamera(width=32, height=32, fps=100) as camera:
        first = camera.read()
        time.sleep(0.1)
        late = camera.read()
    assert late.sequence >= first.sequence + 8
    assert late.age() < 0.05  # the newest due frame, not the one after `first`


def test_grab_latches_the_capture_time_before_retrieve() -> None:
    with SyntheticCamera(width=32, height=32, fps=100) as camera:
        camera.read()
        time.sleep(0.05)
        camera.grab()
        latched = time.monotonic()
        time.sleep(0.05)
        frame = camera.retrieve()
    assert frame.monotonic_time <= latched + 0.011


def test_reading_a_closed_camera_fails_clearly() -> None:
    camera = SyntheticCamera()
    with pytest.raises(CameraError, match="not open"):
        camera.read()
    with pytest.raises(CameraError, match="fps"):
        SyntheticCamera(fps=0)


def test_image_folder_plays_in_name_order_as_rgb_and_loops(tmp_path: Path) -> None:
    for name, rgb in (("b.png", GREEN), ("a.png", RED), ("c.jpg", BLUE)):
        cv2.imwrite(str(tmp_path / name), cv2.cvtColor(solid(rgb), cv2.COLOR_RGB2BGR))
    (tmp_path / "notes.txt").write_text("not an image")
    with ImageFolderCamera(tmp_path, fps=200) as camera:
        frames = read_n(camera, 4)
    colours = [dominant(f.image) for f in frames]
    expected = [[RED, GREEN, BLUE][f.sequence % 3] for f in frames]
    assert all(close_to(c, e) for c, e in zip(colours, expected, strict=True)), colours
    assert_timeline(frames)


def test_image_folder_errors(tmp_path: Path) -> None:
    with pytest.raises(CameraError, match="no images"):
        ImageFolderCamera(tmp_path).open()
    with pytest.raises(CameraError, match="not a folder"):
        ImageFolderCamera(tmp_path / "missing").open()


def test_video_file_plays_at_its_rate_as_rgb_and_loops(write_video: WriteVideo) -> None:
    colours = [RED, GREEN, BLUE]
    path = write_video([solid(c) for c in colours], fps=40)
    camera = VideoFileCamera(path)
    assert camera.fps == 40 and camera.frame_count == 3
    with camera:
        started = time.monotonic()
        frames = read_n(camera, 7)
        elapsed = time.monotonic() - started
    for frame in frames:
        assert frame.image.shape == (48, 64, 3)
        assert close_to(dominant(frame.image), colours[frame.sequence % 3])
    assert_timeline(frames)
    assert elapsed >= 5 / 40


def test_video_file_rate_override_and_skipping(write_video: WriteVideo) -> None:
    colours = [RED, GREEN, BLUE, RED, GREEN]
    path = write_video([solid(c) for c in colours], fps=5)
    with VideoFileCamera(path, fps=100) as camera:
        camera.read()
        time.sleep(0.07)
        frame = camera.read()
    assert frame.sequence >= 6
    assert close_to(dominant(frame.image), colours[frame.sequence % 5])


def test_video_file_errors(tmp_path: Path) -> None:
    with pytest.raises(CameraError, match="does not exist"):
        VideoFileCamera(tmp_path / "missing.avi")
    garbage = tmp_path / "garbage.avi"
    garbage.write_bytes(b"not a video at all")
    with pytest.raises(CameraError):
        VideoFileCamera(garbage)
