"""Several named cameras read together into one `Observation` per control step.

The rig grabs every camera first and decodes afterwards, so the capture moments are as close as
the devices allow, then reports the skew (latest minus earliest capture) and refuses any frame
older than `max_age_s`. Peers read cameras one after another and send frames up to 500 ms old
with no capture times; here each camera's capture time travels in the observation
(`Observation.capture_times`) and shows in the debug log.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from types import TracebackType

import numpy as np

from vla_client.cameras.base import Camera, Frame
from vla_client.errors import CameraError, CameraSettingError, StaleFrameError
from vla_client.observation import Observation
from vla_client.validation import check_positive

logger = logging.getLogger(__name__)

Preprocessor = Callable[[Observation], Observation]


@dataclass(frozen=True)
class RigCapture:
    """One step's observation, the raw frames behind it (by local camera name) and their skew."""

    observation: Observation
    frames: Mapping[str, Frame]
    skew_s: float


class CameraRig:
    """Named cameras opened, read and closed together; a context manager."""

    def __init__(
        self,
        cameras: Mapping[str, Camera],
        *,
        max_age_s: float = 0.2,
        timeout_s: float | None = None,
        preprocessor: Preprocessor | None = None,
    ) -> None:
        if not cameras:
            raise CameraSettingError("a camera rig needs at least one camera")
        check_positive("max_age_s", max_age_s, error=CameraSettingError)
        check_positive("timeout_s", timeout_s, allow_none=True, error=CameraSettingError)
        if preprocessor is not None and not callable(preprocessor):
            raise CameraSettingError(f"preprocessor must be callable; got {preprocessor!r}")
        self.cameras = dict(cameras)
        self.max_age_s = max_age_s
        self.timeout_s = timeout_s
        self.preprocessor = preprocessor

    def open(self) -> None:
        """Open every camera; if one fails, close the ones already open and raise."""
        opened: list[Camera] = []
        try:
            for camera in self.cameras.values():
                camera.open()
                opened.append(camera)
        except BaseException:
            for camera in opened:
                camera.close()
            raise

    def close(self) -> None:
        for camera in self.cameras.values():
            camera.close()

    def capture(
        self, *, state: np.ndarray | list[float] | None = None, task: str = ""
    ) -> RigCapture:
        """Grab all cameras, then retrieve all, check ages and build the observation."""
        for camera in self.cameras.values():
            camera.grab()
        frames = {name: self._retrieve(name, camera) for name, camera in self.cameras.items()}
        ages = self._ages(frames)
        times = {name: frame.monotonic_time for name, frame in frames.items()}
        skew = max(times.values()) - min(times.values())
        logger.debug(
            "captured %s; skew %.1f ms",
            ", ".join(f"{n} #{f.sequence} age {ages[n] * 1000:.1f} ms" for n, f in frames.items()),
            skew * 1000,
        )
        observation = Observation(
            {name: frame.image for name, frame in frames.items()}, state, task, times
        )
        if self.preprocessor is not None:
            observation = self.preprocessor(observation)
        return RigCapture(observation, frames, skew)

    def _ages(self, frames: dict[str, Frame]) -> dict[str, float]:
        """Each frame's age now; `StaleFrameError` naming those older than `max_age_s`."""
        now = time.monotonic()
        ages = {name: frame.age(now) for name, frame in frames.items()}
        stale = {name: age for name, age in ages.items() if age > self.max_age_s}
        if stale:
            detail = ", ".join(f"{name} {age * 1000:.0f} ms" for name, age in stale.items())
            raise StaleFrameError(f"frames older than {self.max_age_s * 1000:.0f} ms: {detail}")
        return ages

    def stream(self, task: str = "") -> Iterator[RigCapture]:
        """Capture after capture, each as soon as every camera has a new frame."""
        while True:
            yield self.capture(task=task)

    def _retrieve(self, name: str, camera: Camera) -> Frame:
        try:
            return camera.retrieve(self.timeout_s)
        except CameraError as exc:
            raise type(exc)(f"camera {name!r}: {exc}") from exc

    def __enter__(self) -> CameraRig:
        self.open()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
