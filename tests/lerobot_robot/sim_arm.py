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
CAMERAS = {"front": (120, 160, 3), "wrist": (96, 128, 3)}
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
    returns the joints and each camera's frame, drawn from the joints and the reading's number
    (`draw`), and logs what it returned in `readings`;
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
            reading[name] = draw(shape, list(self.positions.values()), len(self.readings))
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


def draw(shape: tuple[int, ...], positions: list[float], stamp: int = 0) -> np.ndarray:
    """A frame showing `positions` (each in about [-1, 1]) over a smooth gradient: a bar per
    joint, in the top three quarters, whose length follows it; and in the bottom quarter a
    soft blob whose place follows `stamp` (the reading's number), so that frames of consecutive
    readings always differ by more than a video codec's error. Edges are soft, as a camera's
    are, so that what the codec loses is what it loses on camera frames."""
    height, width = shape[:2]
    rows = np.linspace(0, 1, height)[:, None]
    cols = np.linspace(0, 1, width)[None, :]
    frame = np.empty((height, width, 3), np.float64)
    frame[..., 0] = 40 + 120 * cols
    frame[..., 1] = 60 + 100 * rows
    frame[..., 2] = 90 + 60 * (rows * cols)
    top = height * 3 // 4
    band = top // len(positions)
    x = np.arange(width)
    for i, position in enumerate(positions):
        end = (np.clip(np.nan_to_num(position), -1, 1) + 1) / 2 * (width - 1)
        weight = (1 / (1 + np.exp((x - end) / 1.5)))[None, :, None]
        colour = np.array([200.0, 180 + 20 * i, 60])
        rows_of_bar = slice(i * band + 2, (i + 1) * band - 2)
        frame[rows_of_bar] = frame[rows_of_bar] * (1 - weight) + colour * weight
    ys, xs = np.mgrid[0:height, 0:width]
    centre, spread = ((stamp * 0.37) % 1.0) * width, width / 12
    blob = np.exp(-((xs - centre) ** 2 + (ys - (top + height) / 2) ** 2) / (2 * spread**2))
    frame += 90 * blob[..., None]
    return np.clip(frame, 0, 255).round().astype(np.uint8)


def reference_app(**config: Any) -> Any:
    """The reference policy set to the arm's four joints and two cameras, as a server app
    (`config`: `ServerConfig`'s options)."""
    from vla_client.server import ReferencePolicy, ServerConfig, create_app

    policy = ReferencePolicy(
        action_horizon=HORIZON, action_dim=len(JOINTS), state_dim=len(JOINTS),
        camera_names=tuple(CAMERAS),
    )  # fmt: skip
    return create_app(policy, ServerConfig(**config))
