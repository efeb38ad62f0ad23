"""What the robot saw: named camera frames, proprioceptive state and the task.

`Observation` checks its input once, at construction, so that a bad frame fails in the robot
program with a clear `InvalidObservationError` instead of as a 400 from the server (or, worse, as
a policy that quietly sees a transposed image). Frames are stored as C-contiguous HxWx3 uint8 RGB;
depth frames, kept apart in `Observation.depth`, as HxW uint16 (millimetres) or float32 (metres).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from vla_client.codecs.depth import as_depth_frame
from vla_client.codecs.frames import as_rgb_frame
from vla_client.errors import CodecError, InvalidObservationError


@dataclass(frozen=True, init=False)
class Observation:
    """Camera frames (HxWx3 uint8 RGB), an optional state vector and the task text.

    The state is float32, or float64 when given as float64 (a robot's joint readings usually
    are): openpi requests send it as given, as openpi's example clients do; the action API's
    requests send float32.

    `capture_times` holds each camera's capture time in seconds (`time.monotonic()` on the robot);
    it travels in the request as ``observation.capture_times`` so latency can be measured from the
    moment the frame was taken, without synchronised clocks. Each must be a finite number: a NaN
    would make the observation's age unknowable, and pass or fail an age check by chance.

    `depth` holds depth cameras' frames by camera name, apart from `images`: each an HxW
    (HxWx1 is taken) uint16 array of millimetres or float32 array of metres, kept exactly as
    given (invalid pixels too: 0, NaN, infinities); any other dtype is refused rather than
    converted (`vla_client.codecs.depth`). A camera is in one of the two, and `capture_times`
    may name both. They travel to servers that announce depth cameras (``input.depth_cameras``
    in the metadata) as ``input.observation.depth``; docs/encoding.md says which encodings
    carry them.
    """

    images: Mapping[str, np.ndarray]
    state: np.ndarray | None
    task: str
    capture_times: Mapping[str, float] = field(default_factory=dict)
    depth: Mapping[str, np.ndarray] = field(default_factory=dict)

    def __init__(
        self,
        images: Mapping[str, np.ndarray],
        state: np.ndarray | list[float] | None = None,
        task: str = "",
        capture_times: Mapping[str, float] | None = None,
        depth: Mapping[str, np.ndarray] | None = None,
    ) -> None:
        object.__setattr__(self, "depth", _check_depth(depth))
        object.__setattr__(self, "images", _check_images(images, bool(self.depth)))
        both = sorted(set(self.images) & set(self.depth))
        if both:
            raise InvalidObservationError(f"cameras {both} are in both images and depth")
        object.__setattr__(self, "state", _check_state(state))
        if not isinstance(task, str):
            raise InvalidObservationError(f"task must be a string, got {type(task).__name__}")
        object.__setattr__(self, "task", task)
        times = dict(capture_times or {})
        unknown = set(times) - set(self.images) - set(self.depth)
        if unknown:
            raise InvalidObservationError(f"capture_times names unknown cameras {sorted(unknown)}")
        object.__setattr__(self, "capture_times", _check_capture_times(times))

    @property
    def oldest_capture_time(self) -> float | None:
        """The earliest camera capture time, if the cameras reported any."""
        return min(self.capture_times.values()) if self.capture_times else None


def _check_images(images: Mapping[str, np.ndarray], has_depth: bool) -> dict[str, np.ndarray]:
    """The colour frames as HxWx3 uint8 RGB; none is fine when there are depth frames."""
    if not isinstance(images, Mapping):
        raise InvalidObservationError(
            f"images must be a dict of camera name to frame, got {type(images).__name__}"
        )
    if not images and not has_depth:
        raise InvalidObservationError("an observation needs at least one camera frame")
    return _checked_frames(images, "images", as_rgb_frame)


def _check_depth(depth: Mapping[str, np.ndarray] | None) -> dict[str, np.ndarray]:
    if depth is None:
        return {}
    if not isinstance(depth, Mapping):
        raise InvalidObservationError(
            f"depth must be a dict of camera name to depth frame, got {type(depth).__name__}"
        )
    return _checked_frames(depth, "depth", as_depth_frame)


def _checked_frames(
    frames: Mapping[str, np.ndarray], where: str, layout: Callable[..., np.ndarray]
) -> dict[str, np.ndarray]:
    checked = {}
    for name, frame in frames.items():
        if not isinstance(name, str) or not name:
            raise InvalidObservationError(f"camera names must be non-empty strings, got {name!r}")
        try:
            checked[name] = layout(np.asarray(frame), field=f"{where}.{name}")
        except CodecError as exc:
            raise InvalidObservationError(str(exc)) from None
    return checked


def _check_capture_times(times: Mapping[str, object]) -> dict[str, float]:
    checked = {}
    for name, value in times.items():
        if (
            isinstance(value, bool)
            or not isinstance(value, numbers.Real)
            or not math.isfinite(value)
        ):
            raise InvalidObservationError(
                f"capture_times[{name!r}] must be a finite number of seconds, got {value!r}"
            )
        checked[name] = float(value)
    return checked


def _check_state(state: np.ndarray | list[float] | None) -> np.ndarray | None:
    if state is None:
        return None
    try:
        array = np.asarray(state)
    except (ValueError, TypeError) as exc:
        raise InvalidObservationError(f"state must be a numeric vector: {exc}") from None
    if array.dtype.kind not in "biuf":
        raise InvalidObservationError(f"state must be numeric, got dtype {array.dtype}")
    if array.ndim != 1:
        raise InvalidObservationError(f"state must be a 1-D vector, got shape {array.shape}")
    if array.dtype != np.float64:  # float64 stays: openpi's examples send the robot's own
        array = array.astype(np.float32)
    if not np.isfinite(array).all():
        raise InvalidObservationError("state contains NaN or infinity")
    return array
