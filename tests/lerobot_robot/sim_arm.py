"""A simulated arm as a real LeRobot `Robot`: joints that move toward what they are sent, and
a camera that draws them, so the adapter, a control loop and the export run with no hardware.

Importing this skips the importing test module where lerobot is not installed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

pytest.importorskip(
    "lerobot",
    reason="lerobot is not installed here; .ci/lerobot_venv.sh builds the venv these tests run in",
)

from lerobot.robots import Robot, RobotConfig

JOINTS = ("shoulder_pan", "shoulder_lift", "elbow_flex", "gripper")
CAMERAS = {"front": (96, 128, 3), "wrist": (72, 96, 3)}
HORIZON = 12
"""The reference policy's chunk length in these tests: 0.6 s at the loops' 20 Hz."""


@RobotConfig.register_subclass("vla_sim_arm")
@dataclass(kw_only=True)
class SimArmConfig(RobotConfig):
    """The simulated arm's settings: how far toward its goal a joint moves per command."""

    gain: float = 0.5


class SimArm(Robot):
    """Four joints (``<joint>.pos``) and two cameras, as LeRobot's arms describe theirs.

    Each `send_action` moves every joint `gain` of the way to its goal. `get_observation`
    returns the joints and each camera's frame, drawn from the joints (a bar per joint whose
    length is its position, over a gradient), and logs what it returned in `readings`;
    `send_action` logs the dicts it got in `sent`. `camera_shapes` are its cameras (a test may
    change them to make the robot break its word).
    """

    config_class = SimArmConfig
    name = "vla_sim_arm"

    def __init__(self, config: SimArmConfig) -> None:
        super().__init__(config)
        self.config = config
        self.positions = dict.fromkeys(JOINTS, 0.0)
        self.readings: list[dict[str, Any]] = []
        self.sent: list[dict[str, float]] = []
        self.camera_shapes: dict[str, tuple[int, ...]] = dict(CAMERAS)
        self._connected = False

    @property
    def observation_features(self) -> dict[str, Any]:
        return {**{f"{j}.pos": float for j in JOINTS}, **self.camera_shapes}

    @property
    def action_features(self) -> dict[str, Any]:
        return {f"{j}.pos": float for j in JOINTS}

    @property
    def is_connected(self) -> bool:
        return self._connected

    def connect(self, calibrate: bool = True) -> None:
        self._connected = True

    @property
    def is_calibrated(self) -> bool:
        return True

    def calibrate(self) -> None:
        pass

    def configure(self) -> None:
        pass

    def get_observation(self) -> dict[str, Any]:
        assert self._connected, "read while disconnected"
        reading: dict[str, Any] = {f"{j}.pos": p for j, p in self.positions.items()}
        for name, shape in self.camera_shapes.items():
            reading[name] = draw(shape, list(self.positions.values()))
        self.readings.append(reading)
        return reading

    def send_action(self, action: dict[str, Any]) -> dict[str, Any]:
        assert self._connected, "commanded while disconnected"
        assert list(action) == list(self.action_features), list(action)
        self.sent.append(dict(action))
        for joint in JOINTS:
            goal = float(action[f"{joint}.pos"])
            self.positions[joint] += self.config.gain * (goal - self.positions[joint])
        return action

    def disconnect(self) -> None:
        self._connected = False


def draw(shape: tuple[int, ...], positions: list[float]) -> np.ndarray:
    """A frame showing `positions` (each in about [-1, 1]): a smooth gradient, and a bar per
    joint whose length and brightness follow it."""
    height, width = shape[:2]
    rows = np.linspace(0, 1, height)[:, None]
    cols = np.linspace(0, 1, width)[None, :]
    frame = np.empty((height, width, 3), np.float64)
    frame[..., 0] = 40 + 120 * cols
    frame[..., 1] = 60 + 100 * rows
    frame[..., 2] = 90 + 60 * (rows * cols)
    band = height // len(positions)
    for i, position in enumerate(positions):
        length = round((np.clip(np.nan_to_num(position), -1, 1) + 1) / 2 * (width - 1))
        frame[i * band + 2 : (i + 1) * band - 2, : length + 1] = (200, 180 + 20 * i, 60)
    return frame.round().astype(np.uint8)


def reference_app(**config: Any) -> Any:
    """The reference policy set to the arm's four joints and two cameras, as a server app
    (`config`: `ServerConfig`'s options)."""
    from vla_client.server import ReferencePolicy, ServerConfig, create_app

    policy = ReferencePolicy(
        action_horizon=HORIZON, action_dim=len(JOINTS), state_dim=len(JOINTS),
        camera_names=tuple(CAMERAS),
    )  # fmt: skip
    return create_app(policy, ServerConfig(**config))
