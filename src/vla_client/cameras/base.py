"""What every camera hands out, the protocol cameras follow, and the errors they raise.

A frame carries its capture times and a per-camera sequence number so the robot side can tell a
new frame from an old one and measure latency from the moment of capture. Peers drop both
(LeRobot keeps a timestamp inside the camera and sends none), which makes stale or repeated frames
invisible to the policy.

Reading is split in two, `grab()` then `retrieve()`, so a rig can latch every camera first and
decode afterwards: the capture moments end up as close together as the devices allow.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from types import TracebackType
from typing import Protocol, TypeVar, runtime_checkable

import numpy as np

_C = TypeVar("_C", bound="CameraBase")


@dataclass(frozen=True)
class Frame:
    """One captured image (HxWx3 uint8 RGB) with its per-camera sequence number and capture times.

    `monotonic_time` is `time.monotonic()` at capture, for ages and skew; `wall_time` is
    `time.time()` at the same moment, for logs and matching against other recordings.
    """

    image: np.ndarray
    sequence: int
    monotonic_time: float
    wall_time: float

    def age(self, now: float | None = None) -> float:
        """Seconds since capture, on the monotonic clock."""
        return (time.monotonic() if now is None else now) - self.monotonic_time


@runtime_checkable
class Camera(Protocol):
    """A source of frames. `read()` never returns the same frame twice."""

    source: str

    def open(self) -> None:
        """Connect to the device or file; raises `CameraError` when that fails."""

    def grab(self) -> None:
        """Latch the next frame cheaply, without decoding it."""

    def retrieve(self, timeout: float | None = None) -> Frame:
        """The frame latched by `grab()`, decoded; raises `CameraTimeoutError` if none comes."""

    def read(self, timeout: float | None = None) -> Frame:
        """`grab()` then `retrieve()`: the newest frame not handed out before."""

    def close(self) -> None:
        """Release the device; safe to call twice."""

    def __enter__(self) -> Camera: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None: ...


class CameraBase:
    """The parts every camera shares: `read()` as grab plus retrieve, and the context manager."""

    source: str = "camera"

    def open(self) -> None:
        raise NotImplementedError

    def grab(self) -> None:
        raise NotImplementedError

    def retrieve(self, timeout: float | None = None) -> Frame:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def read(self, timeout: float | None = None) -> Frame:
        self.grab()
        return self.retrieve(timeout)

    def __enter__(self: _C) -> _C:
        self.open()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.source!r})"
