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
    the cameras' mean colours, the state and the task text.
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
    features = [cv2.mean(observation.images[name])[:3] for name in sorted(observation.images)]
    vector = np.asarray(features, dtype=np.float64).ravel() / 255.0
    if observation.state is not None:
        vector = np.concatenate([vector, observation.state.astype(np.float64)])
    task_phase = (zlib.crc32(observation.task.encode()) % 1000) / 1000.0
    weights = np.cos(np.outer(np.arange(1, action_dim + 1), np.arange(1, vector.size + 1)))
    base = np.tanh(weights @ vector + task_phase)
    steps = np.arange(horizon)[:, None] * (np.arange(action_dim)[None, :] + 1)
    chunk: np.ndarray = (base[None, :] * np.cos(0.1 * steps)).astype(np.float32)
    return chunk
