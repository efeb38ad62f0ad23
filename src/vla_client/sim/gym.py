"""A Gymnasium environment with pixel observations as the robot of an evaluation.

``GymWorld("gym_pusht/PushT-v0", options={"obs_type": "pixels_agent_pos"})`` makes the
environment (importing the id's namespace package first, so it registers itself), and maps its
observation to what a server gets: every image entry (an HxWx3 uint8 box) is a camera, named
after its key unless `cameras` renames it (``{"pixels": "top"}``), and the state is the
entries named in `state_keys` (by default every other box, in key order) concatenated. Each tick
with an action steps the environment once; a tick without one (no chunk yet) leaves it where
it is, as a Gymnasium environment has no time of its own. Success is the ``is_success`` the
environment reports in its info.

It proves that the loop runs any environment end to end; success with a learned policy is
its owner's business. Needs ``gymnasium`` (``pip install 'vla-client[sim]'``) and the
environment's package (``pip install --no-deps gym-pusht``: it pins the GUI OpenCV wheel).
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

PIXELS = "pixels"
"""The camera name of an environment whose whole observation is one image."""
DEFAULT_MAX_STEPS = 1_000


class GymWorld:
    """A Gymnasium environment as a `vla_client.sim.World`; `ValueError` for a bad setup."""

    def __init__(
        self,
        env_id: str,
        *,
        options: Mapping[str, Any] | None = None,
        cameras: Mapping[str, str] | None = None,
        state_keys: Sequence[str] | None = None,
        task: str | None = None,
        max_steps: int | None = None,
    ) -> None:
        self.env = make_env(env_id, options or {})
        self.env_id = env_id
        space = self.env.observation_space
        images = image_keys(space)
        if not images:
            self.env.close()
            raise ValueError(
                f"environment {env_id!r} has no pixel observations (its observation space is "
                f"{space}); ask it for images, e.g. --env-option obs_type=pixels_agent_pos"
            )
        renames = dict(cameras or {})
        unknown = sorted(set(renames) - set(images))
        if unknown:
            self.env.close()
            raise ValueError(
                f"environment {env_id!r} has no image observation {unknown[0]!r}; "
                f"its images are {', '.join(images)}"
            )
        self._images = {key: renames.get(key, key) for key in images}
        self.cameras = tuple(self._images.values())
        self._state_keys = self._pick_state(space, images, state_keys)
        self.action_dim = int(np.prod(self.env.action_space.shape))
        self.task = task if task is not None else env_id
        spec_steps = getattr(self.env.spec, "max_episode_steps", None)
        self.max_steps = max_steps or spec_steps or DEFAULT_MAX_STEPS
        self._observation: Any = None
        self.steps = 0
        self.success = False
        self.episode_return = 0.0
        self._over = False

    def _pick_state(
        self, space: Any, images: list[str], state_keys: Sequence[str] | None
    ) -> list[str]:
        entries = dict(space.spaces) if hasattr(space, "spaces") else {}
        others = [key for key in entries if key not in images]
        if state_keys is None:
            return others
        for key in state_keys:
            if key not in others:
                self.env.close()
                choices = ", ".join(others) or "none"
                raise ValueError(
                    f"environment {self.env_id!r} has no state observation {key!r}; "
                    f"it has {choices}"
                )
        return list(state_keys)

    @property
    def done(self) -> bool:
        """Terminated, truncated, succeeded or out of ticks."""
        return self._over or self.success or self.steps >= self.max_steps

    def reset(self, seed: int) -> None:
        self._observation, info = self.env.reset(seed=seed)
        self.steps = 0
        self.success = bool(info.get("is_success", False))
        self.episode_return = 0.0
        self._over = False

    def frames(self) -> dict[str, np.ndarray]:
        observation = self._observation
        if not isinstance(observation, Mapping):
            return {self.cameras[0]: np.ascontiguousarray(observation)}
        return {name: np.ascontiguousarray(observation[key]) for key, name in self._images.items()}

    def state(self) -> np.ndarray | None:
        if not self._state_keys:
            return None
        parts = [np.asarray(self._observation[key], np.float32).ravel() for key in self._state_keys]
        return np.concatenate(parts)

    def step(self, action: np.ndarray | None) -> None:
        self.steps += 1
        if action is None:
            return
        space = self.env.action_space
        command = np.asarray(action, dtype=space.dtype).reshape(space.shape)
        self._observation, reward, terminated, truncated, info = self.env.step(command)
        self.episode_return += float(reward)
        self.success = self.success or bool(info.get("is_success", False))
        self._over = bool(terminated or truncated)

    def close(self) -> None:
        """Close the environment."""
        self.env.close()


def make_env(env_id: str, options: Mapping[str, Any]) -> Any:
    """`gymnasium.make(env_id, **options)` with its namespace imported; `ValueError` naming
    what is wrong for an unknown id or options the environment refuses."""
    try:
        import gymnasium
    except ImportError:
        raise ValueError(
            "--env needs gymnasium, which is not installed: pip install 'vla-client[sim]'"
        ) from None
    namespace, slash, _ = env_id.partition("/")
    if slash:
        # a namespace's package registers its environments when imported (gym_pusht, say)
        with contextlib.suppress(ImportError):
            importlib.import_module(namespace)
    try:
        return gymnasium.make(env_id, **options)
    except gymnasium.error.Error as exc:
        raise ValueError(f"unknown environment {env_id!r}: {exc}") from None
    except TypeError as exc:
        raise ValueError(f"environment {env_id!r} refuses the options given: {exc}") from None


def image_keys(space: Any) -> list[str]:
    """Keys of the observation entries that are images (HxWx3 uint8 boxes); `PIXELS` for an
    observation that is one image itself."""
    if _is_image(space):
        return [PIXELS]
    entries = getattr(space, "spaces", None)
    if not isinstance(entries, Mapping):
        return []
    return [key for key, entry in entries.items() if _is_image(entry)]


def _is_image(space: Any) -> bool:
    shape = getattr(space, "shape", None)
    return (
        shape is not None
        and len(shape) == 3
        and shape[2] == 3
        and np.dtype(getattr(space, "dtype", None) or np.float64) == np.uint8
    )
