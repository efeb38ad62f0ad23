"""Real media for camera tests: video files written by OpenCV in the test's tmp_path."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import cv2
import numpy as np
import pytest
from camera_media import WriteVideo


@pytest.fixture
def write_video(tmp_path: Path) -> WriteVideo:
    """Write RGB frames as an MJPG .avi (converted to BGR as cv2 expects) and return its path."""

    def write(frames: Sequence[np.ndarray], fps: float = 25.0, name: str = "clip.avi") -> Path:
        path = tmp_path / name
        height, width = frames[0].shape[:2]
        writer = cv2.VideoWriter(str(path), cv2.VideoWriter.fourcc(*"MJPG"), fps, (width, height))
        assert writer.isOpened(), "OpenCV cannot write MJPG .avi files here"
        for frame in frames:
            writer.write(cv2.cvtColor(frame, cv2.COLOR_RGB2BGR))
        writer.release()
        return path

    return write
