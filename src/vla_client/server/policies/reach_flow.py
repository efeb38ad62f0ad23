"""A stochastic flow-matching policy for the reach task: several ways to the target, so
independent chunks disagree at their seams and real-time chunking has something to fix.

It sees what `ReachPolicy` sees (the target and the robot found by colour in the frames, the
target's velocity tracked between requests) and plans from the same straight pursuit: row h aims
where the target will be at the end of step h. What it learned is how to get there: the scripted
demonstrations it was trained on (``tools/train_reach_flow.py`` in a checkout) swing out to one
side of the straight line, left or right at random, by a random fraction of the distance left,
and come in as the robot closes. A small MLP, trained by flow matching, generates that swing in
the frame of the line from the robot to the target, in units of `RESIDUAL_SCALE_M`; the network
predicts the clean chunk from a noisy one, and the velocity follows from it, ``v = (x1_hat - x)
/ (1 - tau)``. Two chunks sampled for consecutive observations pick their sides independently,
so a robot switching between them zigzags, unless the server inpaints each new chunk from the
old one's remainder (RTC: `vla_client.server.policies.flow`).

The weights (``reach_flow.npz``, about 100 KB) ship with the package; ``python
tools/train_reach_flow.py`` reproduces them from the demonstrations with a fixed seed in
seconds, on a CPU, with numpy alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vla_client.protocol.rtc import CAPABILITY
from vla_client.server.policies import mlp
from vla_client.server.policies.flow import FlowPolicy, rtc_capability
from vla_client.server.policies.reach import ReachPolicy
from vla_client.server.policy import PolicyInput, PolicySpec
from vla_client.tasks.reach import ReachSettings
from vla_client.validation import check_positive

WEIGHTS = Path(__file__).with_name("reach_flow.npz")
HORIZON = 16
"""Rows per chunk: 1.6 s at 10 Hz, long enough to overlap the next chunk at 200 ms delays."""
RESIDUAL_SCALE_M = 0.05
"""Metres per policy unit of the swing off the straight line."""
DISTANCE_SCALE_STEPS = 10.0
"""The distance feature is the distance to the target in robot steps over this."""


@dataclass(frozen=True)
class Frame:
    """One observation, as the field and the unit conversions need it."""

    direct: np.ndarray
    """The straight pursuit ``[H, 2]`` in metres: where the target will be after each step."""
    along: np.ndarray
    """Unit vector from the robot towards the target."""
    across: np.ndarray
    """`along` turned a quarter left."""
    feature: float
    """Distance to the target in steps, scaled."""


def field_input(x: np.ndarray, feature: float, tau: float) -> np.ndarray:
    """The network's input rows for chunks `x` ``[N, H, 2]``: the chunk, distance, time."""
    count = len(x)
    extra = np.broadcast_to(np.array([feature, tau], np.float64), (count, 2))
    return np.concatenate([x.reshape(count, -1), extra], axis=1)


class ReachFlowPolicy(FlowPolicy):
    """The reach task's stochastic flow policy (`vla-client serve --policy reach-flow`).

    Options: `rate_hz`, the control rate it plans for (the eval's ``--rate``), and `weights`,
    an ``.npz`` from ``tools/train_reach_flow.py`` (default: the shipped one). Announces
    real-time chunking.
    """

    def __init__(self, *, rate_hz: float = 10.0, weights: str | Path | None = None) -> None:
        check_positive("rate_hz", rate_hz, finite=True)
        self.rate_hz = float(rate_hz)
        self.weights_path = Path(weights) if weights is not None else WEIGHTS
        self._eyes = ReachPolicy(action_horizon=HORIZON, rate_hz=rate_hz)
        self._weights: mlp.Weights | None = None
        self._spec = PolicySpec(
            family="reach-flow",
            action_horizon=HORIZON,
            action_dim=2,
            camera_names=("top", "wrist"),
            state_dim=1,
            num_inference_steps=self.num_steps,
            extra_capabilities={CAPABILITY: rtc_capability(self.max_guidance_weight)},
        )

    @property
    def spec(self) -> PolicySpec:
        return self._spec

    def load(self) -> None:
        """Read the network's weights."""
        with np.load(self.weights_path) as data:
            self._weights = {name: data[name].astype(np.float64) for name in data.files}

    def condition(self, observation: PolicyInput) -> Frame:
        robot, target, velocity = self._eyes.sense(observation)
        offset = target - robot
        distance = float(np.linalg.norm(offset))
        along = offset / distance if distance > 1e-9 else np.array([1.0, 0.0])
        step_m = ReachSettings().max_speed_mps / self.rate_hz
        return Frame(
            direct=self._eyes.plan(target, velocity, HORIZON).astype(np.float64),
            along=along,
            across=np.array([-along[1], along[0]]),
            feature=distance / step_m / DISTANCE_SCALE_STEPS,
        )

    def velocity(self, x: np.ndarray, tau: float, condition: Frame) -> np.ndarray:
        clean, _ = mlp.forward(self._net(), field_input(x[None], condition.feature, tau))
        velocity: np.ndarray = (clean.reshape(x.shape) - x) / (1 - tau)
        return velocity

    def velocity_vjp(
        self, x: np.ndarray, tau: float, condition: Frame, cotangent: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        weights = self._net()
        clean, activations = mlp.forward(weights, field_input(x[None], condition.feature, tau))
        _, input_grad = mlp.backward(weights, activations, cotangent.reshape(1, -1))
        pulled = input_grad[0, : x.size].reshape(x.shape)
        return (clean.reshape(x.shape) - x) / (1 - tau), (pulled - cotangent) / (1 - tau)

    def to_policy_units(self, actions: np.ndarray, condition: Frame) -> np.ndarray:
        off_line = actions - condition.direct[: len(actions)]
        basis = np.stack([condition.along, condition.across], axis=1)
        units: np.ndarray = off_line @ basis / RESIDUAL_SCALE_M
        return units

    def to_robot_units(self, x: np.ndarray, condition: Frame) -> np.ndarray:
        basis = np.stack([condition.along, condition.across], axis=0)
        chunk: np.ndarray = condition.direct[: len(x)] + RESIDUAL_SCALE_M * (x @ basis)
        return chunk.astype(np.float32)

    def _net(self) -> mlp.Weights:
        if self._weights is None:  # served in-process without `load` (tests, notebooks)
            self.load()
        assert self._weights is not None
        return self._weights
