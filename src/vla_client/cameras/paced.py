"""Cameras that replay or render frames on a schedule, as a live camera would deliver them.

Frame `k` is due at `open time + k / fps`. A reader that is late gets the newest due frame and the
ones in between are dropped, like a free-running camera; a reader that is early waits for the
next one. The capture time of a frame is its due time, so ages and skews measured on synthetic,
file and folder sources mean the same as on real devices.
"""

from __future__ import annotations

import math
import time

import numpy as np

from vla_client.cameras.base import CameraBase, Frame
from vla_client.errors import CameraError, CameraSettingError, CameraTimeoutError
from vla_client.validation import check_positive


class PacedCamera(CameraBase):
    """Base class: subclasses load their source in `_open_source` and draw frame `k` in `_image`."""

    def __init__(self, fps: float, *, source: str) -> None:
        check_positive(f"{source}: fps", fps, error=CameraSettingError)
        self.fps = float(fps)
        self.source = source
        self._start: tuple[float, float] | None = None
        self._last = -1
        self._latched: int | None = None

    def open(self) -> None:
        if self._start is not None:
            return
        self._open_source()
        self._start = (time.monotonic(), time.time())
        self._last = -1
        self._latched = None

    def close(self) -> None:
        self._start = None
        self._close_source()

    def grab(self) -> None:
        self._latched = self._next_index()

    def retrieve(self, timeout: float | None = None) -> Frame:
        start, wall_start = self._started()
        index = self._latched if self._latched is not None else self._next_index()
        self._latched = None
        offset = index / self.fps
        wait = start + offset - time.monotonic()
        if timeout is not None and wait > timeout:
            raise CameraTimeoutError(f"{self.source}: next frame due in {wait:.3f} s > {timeout} s")
        if wait > 0:
            time.sleep(wait)
        image = self._image(index)
        self._last = index
        return Frame(image, index, start + offset, wall_start + offset)

    def _next_index(self) -> int:
        """The newest frame already due, or the next one if that was handed out."""
        due = math.floor((time.monotonic() - self._started()[0]) * self.fps)
        return max(due, self._last + 1)

    def _started(self) -> tuple[float, float]:
        if self._start is None:
            raise CameraError(f"{self.source} is not open; call open() or use it in a with block")
        return self._start

    def _open_source(self) -> None:
        """Load or check the source; nothing by default."""

    def _close_source(self) -> None:
        """Release the source; nothing by default."""

    def _image(self, index: int) -> np.ndarray:
        raise NotImplementedError
