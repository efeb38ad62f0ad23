"""A deterministic policy for tests, demos and benchmarks.

Its actions are a smooth function of the request (per-camera mean colour, state, task text and
horizon step), so a test can recompute the expected chunk and a load test can tell one
request's reply from another's. It costs about a millisecond, so benchmarks measure transport
and codecs, not a model.
"""

from __future__ import annotations

import zlib

import cv2
import numpy as np

from vla_client.server.policy import Policy, PolicyInput, PolicySpec


class ReferencePolicy(Policy):
    """Deterministic actions computed from the request, for tests, demos and benchmarks.

    ``actions[h, d] = tanh(features . w_d) * cos(0.1 * h * (d + 1))``, where the features are
    the cameras' mean colours (a depth camera's: the mean, least and greatest of its known
    distances, in metres: `depth_features`), the state and the task text. `depth_cameras`
    (name -> ``"uint16"`` or ``"float32"``) are the depth cameras it takes, none by default.
    """

    def __init__(
        self,
        *,
        action_horizon: int = 16,
        action_dim: int = 7,
        camera_names: tuple[str, ...] = (),
        state_dim: int | None = None,
        image_size: tuple[int, int] | None = None,
        image_size_required: bool = False,
        camera_aliases: dict[str, str] | None = None,
        depth_cameras: dict[str, str] | None = None,
    ) -> None:
        self._spec = PolicySpec(
            family="reference",
            action_horizon=action_horizon,
            action_dim=action_dim,
            camera_names=tuple(camera_names),
            state_dim=state_dim,
            num_inference_steps=1,
            image_size=None if image_size is None else (int(image_size[0]), int(image_size[1])),
            image_size_required=image_size_required,
            camera_aliases=dict(camera_aliases or {}),
            depth_cameras=dict(depth_cameras or {}),
        )

    @property
    def spec(self) -> PolicySpec:
        return self._spec

    def infer(self, observation: PolicyInput) -> np.ndarray:
        return reference_actions(
            observation,
            horizon=observation.action_horizon or self._spec.action_horizon,
            action_dim=self._spec.action_dim,
        )


def reference_actions(observation: PolicyInput, *, horizon: int, action_dim: int) -> np.ndarray:
    """The reference chunk for `observation`; exposed so tests can compute the expected reply."""
    features = [
        depth_features(frame) if frame.ndim == 2 else cv2.mean(frame)[:3]
        for frame in (observation.images[name] for name in sorted(observation.images))
    ]
    vector = np.asarray(features, dtype=np.float64).ravel() / 255.0
    if observation.state is not None:
        vector = np.concatenate([vector, observation.state.astype(np.float64)])
    task_phase = (zlib.crc32(observation.task.encode()) % 1000) / 1000.0
    weights = np.cos(np.outer(np.arange(1, action_dim + 1), np.arange(1, vector.size + 1)))
    base = np.tanh(weights @ vector + task_phase)
    steps = np.arange(horizon)[:, None] * (np.arange(action_dim)[None, :] + 1)
    chunk: np.ndarray = (base[None, :] * np.cos(0.1 * steps)).astype(np.float32)
    return chunk


def depth_features(frame: np.ndarray) -> tuple[float, float, float]:
    """A depth frame's (mean, least, greatest) known distance in metres, times 255 (the colour
    features' scale): uint16 frames are millimetres, float32 metres; 0, NaN and infinities are
    unknown. All zero when nothing is known."""
    metres = frame.astype(np.float64) / (1000.0 if frame.dtype == np.uint16 else 1.0)
    known = metres[np.isfinite(metres) & (metres > 0)]
    if not known.size:
        return (0.0, 0.0, 0.0)
    return (float(known.mean()) * 255.0, float(known.min()) * 255.0, float(known.max()) * 255.0)
