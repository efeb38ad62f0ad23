"""A camera that plays a video file at the file's own frame rate (or a given one), looping.

Playback is paced like a live camera: a slow reader skips frames instead of drifting behind, so a
recorded episode replays in real time through the same rig, preprocessing and timing as live
cameras. Skipped frames are only demuxed (`VideoCapture.grab`), not decoded.
"""

from __future__ import annotations

import math
from pathlib import Path

import cv2
import numpy as np

from vla_client.cameras.paced import PacedCamera
from vla_client.errors import CameraError, CameraSettingError
from vla_client.validation import check_positive


class VideoFileCamera(PacedCamera):
    """Frame `k` is frame `k mod n` of the file; `fps=None` uses the rate the file reports."""

    def __init__(self, path: str | Path, *, fps: float | None = None) -> None:
        self.path = Path(path)
        check_positive(f"{self.path}: fps", fps, allow_none=True, error=CameraSettingError)
        file_fps, self.frame_count = _probe(self.path)
        rate = file_fps if fps is None else fps
        if not rate > 0:
            raise CameraError(f"{self.path} reports no frame rate; pass fps= to play it")
        super().__init__(rate, source=str(self.path))
        self._capture: cv2.VideoCapture | None = None
        self._next = 0

    def _open_source(self) -> None:
        self._rewind()

    def _close_source(self) -> None:
        if self._capture is not None:
            self._capture.release()
            self._capture = None

    def _image(self, index: int) -> np.ndarray:
        target = index % self.frame_count
        for _ in range((target - self._next) % self.frame_count):
            self._advance()
        capture = self._advance()
        ok, image = capture.retrieve()
        if not ok or image is None:
            raise CameraError(f"cannot decode frame {target} of {self.path}")
        return cv2.cvtColor(image, cv2.COLOR_BGR2RGB)

    def _advance(self) -> cv2.VideoCapture:
        """Demux the next frame, rewinding at the end; returns the capture positioned on it."""
        capture = self._capture
        if capture is None or self._next >= self.frame_count:
            capture = self._rewind()
        if not capture.grab():
            if self._next == 0:
                raise CameraError(f"cannot read a frame from {self.path}")
            self.frame_count = self._next  # the container over-reported its length
            capture = self._rewind()
            if not capture.grab():
                raise CameraError(f"cannot read a frame from {self.path}")
        self._next += 1
        return capture

    def _rewind(self) -> cv2.VideoCapture:
        self._close_source()
        self._capture = _open(self.path)
        self._next = 0
        return self._capture


def _open(path: Path) -> cv2.VideoCapture:
    capture = cv2.VideoCapture(str(path))
    if not capture.isOpened():
        capture.release()
        raise CameraError(f"cannot open video file {path}")
    return capture


def _probe(path: Path) -> tuple[float, int]:
    """The file's frame rate and frame count, counting frames when the container does not say."""
    if not path.is_file():
        raise CameraError(f"video file {path} does not exist")
    capture = _open(path)
    try:
        fps = float(capture.get(cv2.CAP_PROP_FPS))
        count = int(capture.get(cv2.CAP_PROP_FRAME_COUNT))
        if count <= 0:
            count = 0
            while capture.grab():
                count += 1
    finally:
        capture.release()
    if count == 0:
        raise CameraError(f"video file {path} holds no frames")
    return (fps if math.isfinite(fps) else 0.0), count
