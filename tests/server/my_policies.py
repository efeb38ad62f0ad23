"""Policies of one's own, as a user's package would hold them, for the policy-loading tests."""

from __future__ import annotations

from typing import Any

import numpy as np

from vla_client.server.policy import Policy, PolicyInput, PolicySpec


class Constant(Policy):
    """Answers `value` everywhere: a chunk a test can tell from any other policy's."""

    def __init__(self, horizon: int = 4, value: float = 0.5, dim: int = 3) -> None:
        self.value = value
        self._spec = PolicySpec(family="constant", action_horizon=horizon, action_dim=dim)

    @property
    def spec(self) -> PolicySpec:
        return self._spec

    def infer(self, observation: PolicyInput) -> np.ndarray:
        return np.full((self._spec.action_horizon, self._spec.action_dim), self.value, np.float32)


def make_constant(horizon: int = 4, value: float = 0.25) -> Constant:
    """A factory: what `--policy my_policies:make_constant` calls."""
    return Constant(horizon=horizon, value=value)


READY = Constant(horizon=2, value=0.75)


def broken_factory(horizon: int = 1) -> Constant:
    raise RuntimeError("no checkpoint here")


def not_a_policy() -> str:
    return "hello"


NUMBER = 42


class FakeOpenpiPolicy:
    """Written to openpi's documented interface: ``infer(obs: dict) -> dict`` with ``actions``,
    ``metadata`` and ``reset()``. Its actions are the SHA-256 rows of what it was sent, read in
    the layout openpi's own input transforms read."""

    def __init__(self, layout: str) -> None:
        self.layout = layout
        self.metadata: dict[str, Any] = {"reset_pose": [0.0] * 7}
        self.resets = 0

    def infer(self, obs: dict[str, Any]) -> dict[str, Any]:
        from digest_policy import sha256_rows

        frames, state = read_like_openpi(obs, self.layout)
        return {"actions": sha256_rows(frames, state), "policy_timing": {}}

    def reset(self) -> None:
        self.resets += 1


def read_like_openpi(obs: dict[str, Any], layout: str) -> tuple[dict[str, np.ndarray], Any]:
    """Frames (HxWx3) and state, read from `obs` the way openpi's input transform for `layout`
    reads them (DroidInputs, LiberoInputs, AlohaInputs), key by key."""
    if layout == "droid":
        frames = {
            "exterior_image_1_left": obs["observation/exterior_image_1_left"],
            "wrist_image_left": obs["observation/wrist_image_left"],
        }
        joints, gripper = obs["observation/joint_position"], obs["observation/gripper_position"]
        return frames, np.concatenate([joints, gripper])
    if layout == "libero":
        frames = {"image": obs["observation/image"], "wrist_image": obs["observation/wrist_image"]}
        return frames, obs["observation/state"]
    if layout == "aloha":
        frames = {name: np.transpose(chw, (1, 2, 0)) for name, chw in obs["images"].items()}
        return frames, obs["state"]
    prefix = "observation.images."
    frames = {k.removeprefix(prefix): v for k, v in obs.items() if k.startswith(prefix)}
    return frames, obs.get("observation.state")


class Lifecycle(Constant):
    """Writes each step of its life to the file `log`, one line each, from the process that
    runs it: ``load PID``, ``warm_up CAMERA:HxWx3,... state:N`` and ``close``. `gate`: `load`
    waits until that file exists; `fail`: ``load`` or ``warm_up`` raises there."""

    def __init__(self, log: str, gate: str = "", fail: str = "") -> None:
        super().__init__(horizon=3, value=0.5, dim=2)
        self._spec = PolicySpec(
            family="lifecycle", action_horizon=3, action_dim=2,
            camera_names=("wrist", "top"), image_size=(48, 64), state_dim=5,
        )  # fmt: skip
        self.log, self.gate, self.fail = log, gate, fail

    def _write(self, line: str) -> None:
        with open(self.log, "a") as file:
            file.write(line + "\n")

    def load(self) -> None:
        import os
        import time

        while self.gate and not os.path.exists(self.gate):
            time.sleep(0.02)
        if self.fail == "load":
            raise FileNotFoundError("no checkpoint at /models/secret.ckpt")
        self._write(f"load {os.getpid()}")

    def warm_up(self, example: PolicyInput) -> None:
        if self.fail == "warm_up":
            raise RuntimeError("CUDA out of memory")
        shapes = ",".join(f"{k}:{'x'.join(map(str, v.shape))}" for k, v in example.images.items())
        state = "none" if example.state is None else example.state.size
        self._write(f"warm_up {shapes} state:{state}")

    def close(self) -> None:
        self._write("close")


class Misbehaving(Constant):
    """The task picks what goes wrong: ``shape`` (a chunk of the wrong shape), ``dtype`` (text),
    ``nan``, ``inf``, ``ragged`` (not an array), ``raise``, ``hang`` (sleeps 30 s); anything
    else is answered as `Constant` does."""

    def infer(self, observation: PolicyInput) -> Any:
        import time

        task = observation.task
        if task == "shape":
            return np.zeros((4, 9), np.float32)
        if task == "dtype":
            return np.full((4, 3), "left", dtype=object)
        if task in ("nan", "inf"):
            chunk = super().infer(observation)
            chunk[1, 1] = np.nan if task == "nan" else np.inf
            return chunk
        if task == "ragged":
            return [[0.0, 1.0], [2.0]]
        if task == "raise":
            raise RuntimeError("secret at /opt/weights")
        if task == "hang":
            time.sleep(30)
        return super().infer(observation)


def make_any(**options: Any) -> Constant:
    """A factory that takes any option: `--policy-option` is not checked against a list."""
    return Constant(horizon=int(options.get("horizon", 4)))


def make_needing(checkpoint: str, horizon: int = 4) -> Constant:
    return Constant(horizon=horizon, value=float(len(checkpoint)))
