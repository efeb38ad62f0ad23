"""A live camera (or anything `cv2.VideoCapture` opens) read by a background thread.

The thread grabs continuously and keeps only the latest frame, so a reader always gets the newest
image instead of one queued in the driver buffer, and reading several cameras costs no more than
reading one. Each frame is stamped right after `grab()` returns, before decoding, which is the
closest OpenCV gets to the moment of exposure.

Faults are handled in the thread: when grabbing fails for `reconnect_delay_s` the device is
released and reopened every `reconnect_delay_s` until it comes back. Readers meanwhile get a
`CameraTimeoutError` after `timeout_s` that says what the thread is doing, never an old frame:
sequence numbers keep counting across reconnects and a frame is handed out at most once.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import cv2
import numpy as np

from vla_client.cameras.base import CameraBase, Frame
from vla_client.errors import CameraError, CameraSettingError, CameraTimeoutError
from vla_client.validation import check_at_least, check_positive

logger = logging.getLogger(__name__)

_FAILED_GRAB_PAUSE_S = 0.005


class OpenCVCamera(CameraBase):
    """A camera by device index (`0`), device path (`/dev/video2`) or any path OpenCV can open.

    `width`, `height`, `fps` and `fourcc` (such as ``"MJPG"``, which many USB cameras need for
    full resolution at 30 fps) are requested from the device; a size the device does not give is
    an error, a different rate or FOURCC only a warning. The first `warmup_frames` after every
    (re)connect are dropped while exposure and white balance settle.
    """

    def __init__(
        self,
        device: int | str | Path,
        *,
        width: int | None = None,
        height: int | None = None,
        fps: float | None = None,
        fourcc: str | None = None,
        warmup_frames: int = 5,
        timeout_s: float = 2.0,
        reconnect_delay_s: float = 0.5,
        backend: int = cv2.CAP_ANY,
    ) -> None:
        if fourcc is not None and (not isinstance(fourcc, str) or len(fourcc) != 4):
            raise CameraSettingError(f"FOURCC must be four characters such as MJPG, got {fourcc!r}")
        self.device = str(device) if isinstance(device, Path) else device
        self.source = f"opencv:{self.device}"
        for option, value in (("width", width), ("height", height)):
            check_positive(
                f"{self.source}: {option}", value, allow_none=True, integer=True,
                error=CameraSettingError,
            )  # fmt: skip
        check_positive(f"{self.source}: fps", fps, allow_none=True, error=CameraSettingError)
        check_at_least(
            f"{self.source}: warmup_frames", warmup_frames, 0, integer=True,
            error=CameraSettingError,
        )  # fmt: skip
        for option, seconds in (("timeout_s", timeout_s), ("reconnect_delay_s", reconnect_delay_s)):
            check_positive(f"{self.source}: {option}", seconds, error=CameraSettingError)
        self.width, self.height, self.fps, self.fourcc = width, height, fps, fourcc
        self.warmup_frames = warmup_frames
        self.timeout_s = timeout_s
        self.reconnect_delay_s = reconnect_delay_s
        self.backend = backend
        self._changed = threading.Condition()
        self._latest: Frame | None = None
        self._handed_out = -1
        self._next_sequence = 0
        self._status = "starting"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def open(self) -> None:
        if self._thread is not None:
            return
        capture = self._connect()
        self._latest = None
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(capture, self._stop), name=f"camera {self.device}", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + self.timeout_s
        with self._changed:
            while self._latest is None and time.monotonic() < deadline:
                self._changed.wait(deadline - time.monotonic())
            opened = self._latest is not None
        if not opened:
            self.close()
            raise CameraTimeoutError(
                f"{self.source} opened but gave no frame within {self.timeout_s} s ({self._status})"
            )

    def close(self) -> None:
        thread, self._thread = self._thread, None
        if thread is not None:
            self._stop.set()
            thread.join(timeout=max(1.0, self.timeout_s))

    def grab(self) -> None:
        """Nothing to latch: the background thread grabs continuously."""

    def retrieve(self, timeout: float | None = None) -> Frame:
        """The latest frame not handed out yet, waiting up to `timeout` (default `timeout_s`)."""
        limit = self.timeout_s if timeout is None else timeout
        deadline = time.monotonic() + limit
        with self._changed:
            if self._thread is None:
                raise CameraError(f"{self.source} is not open; call open() or use a with block")
            while self._latest is None or self._latest.sequence <= self._handed_out:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise CameraTimeoutError(self._timeout_message(limit))
                self._changed.wait(remaining)
            self._handed_out = self._latest.sequence
            return self._latest

    def _connect(self) -> cv2.VideoCapture:
        """Open the device and apply the requested mode; raises `CameraError` when it cannot."""
        capture = cv2.VideoCapture(self.device, self.backend)
        if not capture.isOpened():
            capture.release()
            raise CameraError(f"cannot open camera {self.device!r}")
        if self.fourcc is not None:
            capture.set(cv2.CAP_PROP_FOURCC, cv2.VideoWriter.fourcc(*self.fourcc))
        for prop, value in (
            (cv2.CAP_PROP_FRAME_WIDTH, self.width),
            (cv2.CAP_PROP_FRAME_HEIGHT, self.height),
            (cv2.CAP_PROP_FPS, self.fps),
        ):
            if value is not None:
                capture.set(prop, value)
        try:
            self._check_mode(capture)
        except CameraError:
            capture.release()
            raise
        return capture

    def _check_mode(self, capture: cv2.VideoCapture) -> None:
        mode = describe_mode(capture)
        size = (
            int(capture.get(cv2.CAP_PROP_FRAME_WIDTH)),
            int(capture.get(cv2.CAP_PROP_FRAME_HEIGHT)),
        )
        if (self.width or size[0], self.height or size[1]) != size:
            raise CameraError(
                f"{self.source} gives {mode}, not the requested {self.width}x{self.height}; "
                "`vla-client cameras` lists the modes it supports"
            )
        if self.fps is not None and abs(capture.get(cv2.CAP_PROP_FPS) - self.fps) > 0.5:
            logger.warning("%s: asked for %s fps, device gives %s", self.source, self.fps, mode)
        if self.fourcc is not None and self.fourcc not in mode:
            logger.warning("%s: asked for %s, device gives %s", self.source, self.fourcc, mode)

    def _run(self, capture: cv2.VideoCapture | None, stop: threading.Event) -> None:
        try:
            self._stream(capture, stop)
        except Exception as exc:  # a dead thread must not pass for a slow camera
            logger.exception("%s: capture thread failed", self.source)
            self._set_status(f"capture thread stopped: {exc!r}; close and reopen the camera")

    def _stream(self, capture: cv2.VideoCapture | None, stop: threading.Event) -> None:
        """Grab, stamp and convert frames until stopped, reconnecting when grabbing fails."""
        warmup = self.warmup_frames
        failing_since: float | None = None
        try:
            while not stop.is_set():
                if capture is None:
                    capture = self._reconnect(stop)
                    warmup, failing_since = self.warmup_frames, None
                    continue
                ok = capture.grab()
                now, wall = time.monotonic(), time.time()
                image = capture.retrieve()[1] if ok else None
                if image is None:
                    failing_since = failing_since or now
                    if now - failing_since >= self.reconnect_delay_s:
                        capture.release()
                        capture = None
                        stamp = time.strftime("%H:%M:%S")
                        self._set_status(f"disconnected at {stamp}; reconnecting")
                    else:
                        stop.wait(_FAILED_GRAB_PAUSE_S)
                    continue
                failing_since = None
                if warmup > 0:
                    warmup -= 1
                    continue
                self._publish(Frame(to_rgb(image), self._next_sequence, now, wall))
        finally:
            if capture is not None:
                capture.release()

    def _publish(self, frame: Frame) -> None:
        self._next_sequence = frame.sequence + 1
        with self._changed:
            self._latest = frame
            self._status = "connected"
            self._changed.notify_all()

    def _reconnect(self, stop: threading.Event) -> cv2.VideoCapture | None:
        if stop.wait(self.reconnect_delay_s):
            return None
        try:
            capture = self._connect()
        except CameraError as exc:
            self._set_status(f"disconnected; reconnecting every {self.reconnect_delay_s} s: {exc}")
            return None
        logger.info("%s reconnected", self.source)
        return capture

    def _set_status(self, status: str) -> None:
        with self._changed:
            if status != self._status:
                logger.warning("%s: %s", self.source, status)
            self._status = status

    def _timeout_message(self, limit: float) -> str:
        last = self._latest
        since = f"last frame {last.age():.2f} s ago" if last is not None else "no frame yet"
        return f"{self.source}: no new frame within {limit} s ({since}; {self._status})"


def to_rgb(image: np.ndarray) -> np.ndarray:
    """OpenCV's BGR, BGRA or grey image as HxWx3 RGB."""
    if image.ndim == 2 or image.shape[2] == 1:
        return cv2.cvtColor(image, cv2.COLOR_GRAY2RGB)
    if image.shape[2] == 4:
        return cv2.cvtColor(image, cv2.COLOR_BGRA2RGB)
    return cv2.cvtColor(image, cv2.COLOR_BGR2RGB)


def describe_mode(capture: cv2.VideoCapture) -> str:
    """The capture's current mode, such as ``640x480 @ 30.0 fps MJPG``."""
    code = int(capture.get(cv2.CAP_PROP_FOURCC))
    fourcc = "".join(chr((code >> (8 * i)) & 0xFF) for i in range(4)).strip("\x00 ") or "?"
    width = int(capture.get(cv2.CAP_PROP_FRAME_WIDTH))
    height = int(capture.get(cv2.CAP_PROP_FRAME_HEIGHT))
    return f"{width}x{height} @ {capture.get(cv2.CAP_PROP_FPS):.1f} fps {fourcc}"
