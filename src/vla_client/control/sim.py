"""A tiny simulated robot, so examples and benchmarks can close the loop without hardware.

`SimRobot` is a set of joints driven by velocity commands: each applied action is integrated
over one control period. Its observations carry the joint positions as state and monotonic
capture times, like a real robot's would, with frames from any renderer (the synthetic scenes
in `vla_client.cameras.scene`, say).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

import numpy as np
import numpy.typing as npt

from vla_client.control.types import Action
from vla_client.observation import Observation

Frames = Callable[[int], Mapping[str, np.ndarray]]
"""Camera frames for step t."""


def _blank_frames(t: int) -> dict[str, np.ndarray]:
    return {"wrist": np.zeros((16, 16, 3), dtype=np.uint8)}


class SimRobot:
    """Joint positions that integrate velocity actions: ``q += action * dt`` per `apply`."""

    def __init__(
        self,
        action_dim: int,
        dt: float,
        *,
        frames: Frames = _blank_frames,
        task: str = "",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if action_dim <= 0 or dt <= 0:
            raise ValueError("action_dim and dt must be > 0")
        self.dt = dt
        self.position: Action = np.zeros(action_dim, dtype=np.float32)
        self.steps = 0
        self._frames = frames
        self._task = task
        self._clock = clock

    def apply(self, action: npt.ArrayLike) -> None:
        """Move every joint at the commanded velocity for one period."""
        velocity = np.asarray(action, dtype=np.float32)
        if velocity.shape != self.position.shape:
            raise ValueError(f"action shape {velocity.shape}, robot has {self.position.shape}")
        self.position = self.position + velocity * np.float32(self.dt)
        self.steps += 1

    def observe(self) -> Observation:
        """Frames for the current step, the joint positions, and the capture time of each frame."""
        images = self._frames(self.steps)
        now = self._clock()
        return Observation(
            images,
            state=self.position.copy(),
            task=self._task,
            capture_times=dict.fromkeys(images, now),
        )
