"""Serve an openpi policy (or anything with its interface) through this server.

openpi's policies, and the objects its ``serve_policy.py`` wraps, answer ``infer(obs) -> dict``:
`obs` is the dict its input transform reads (a layout: see `vla_client.protocol.layouts`) and
the reply holds the chunk under ``"actions"``. `OpenpiPolicy` adapts such an object to
`Policy`, so one openpi checkpoint is reachable over SGLang's HTTP API, the realtime websocket
and ``/openpi/policy`` alike, with this server's entrypoint decoding and batching in front. It
imports nothing of openpi. Serving a checkpoint takes a factory, run in the worker process::

    # my_robot/serve.py
    from vla_client.server.policies import OpenpiPolicy

    def droid_policy() -> OpenpiPolicy:
        def load():  # runs in the worker: the checkpoint and GPU memory belong there
            from openpi.policies import policy_config
            from openpi.training import config

            return policy_config.create_trained_policy(
                config.get_config("pi05_droid"), "gs://openpi-assets/checkpoints/pi05_droid"
            )

        return OpenpiPolicy(load, layout="droid", action_horizon=10, action_dim=8)

    # vla-client serve --policy my_robot.serve:droid_policy
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from vla_client.protocol.layouts import OpenpiLayout, openpi_layout
from vla_client.server.policy import Policy, PolicyInput, PolicySpec


class OpenpiLike(Protocol):
    """openpi's policy interface: a dict in, a dict with ``"actions"`` out."""

    def infer(self, obs: dict[str, Any]) -> dict[str, Any]: ...


class OpenpiPolicy(Policy):
    """An openpi-style policy, or a factory making one, served as a `Policy`.

    `policy` is an object with ``infer(obs: dict) -> dict``, or a callable without arguments
    that returns one; the callable runs in `load()`, in the worker process, so the process that
    serves HTTP never holds the checkpoint. Requests reach it in `layout` (``flat``,
    ``droid``, ``libero``, ``aloha`` or an `OpenpiLayout`), whose cameras and state length are
    announced unless `camera_names` or `state_dim` say otherwise. It returns chunks of
    `action_horizon` x `action_dim`; a request asking for a shorter horizon gets the first
    steps. An object whose ``reset()`` exists is reset by `reset()`.
    """

    def __init__(
        self,
        policy: OpenpiLike | Callable[[], OpenpiLike],
        *,
        layout: str | OpenpiLayout = "droid",
        action_horizon: int,
        action_dim: int,
        camera_names: tuple[str, ...] | None = None,
        state_dim: int | None = None,
        image_size: tuple[int, int] | None = None,
    ) -> None:
        self.layout = openpi_layout(layout)
        self._source = policy
        self._policy: OpenpiLike | None = policy if hasattr(policy, "infer") else None
        if self._policy is None and not callable(policy):
            raise TypeError(
                f"OpenpiPolicy takes an object with infer(obs) or a factory, got {policy!r}"
            )
        self._spec = PolicySpec(
            family="openpi",
            action_horizon=action_horizon,
            action_dim=action_dim,
            camera_names=tuple(camera_names) if camera_names is not None else self.layout.cameras,
            state_dim=state_dim if state_dim is not None else self.layout.state_dim,
            image_size=image_size,
        )

    @property
    def spec(self) -> PolicySpec:
        return self._spec

    def load(self) -> None:
        """Make the openpi policy (when given a factory)."""
        if self._policy is None:
            made = self._source()  # type: ignore[operator]
            if not hasattr(made, "infer"):
                raise TypeError(f"the openpi policy factory returned {type(made).__name__}")
            self._policy = made

    def warm_up(self, example: PolicyInput) -> None:
        """One inference on the announced shapes: openpi's JAX models compile on their first
        call, which can take a minute; better before the server says it is ready."""
        self.infer(example)

    def infer(self, observation: PolicyInput) -> np.ndarray:
        if self._policy is None:
            self.load()
        assert self._policy is not None
        request = self.layout.request(dict(observation.images), observation.state, observation.task)
        reply = self._policy.infer(request)
        if not isinstance(reply, dict) or "actions" not in reply:
            raise ValueError("the openpi policy's reply has no 'actions'")
        actions = np.asarray(reply["actions"], dtype=np.float32)
        horizon = observation.action_horizon
        return actions[:horizon] if horizon is not None else actions

    def reset(self) -> None:
        """Reset the openpi policy, where it has ``reset()``."""
        reset = getattr(self._policy, "reset", None)
        if callable(reset):
            reset()

    def close(self) -> None:
        """Drop the policy the factory made (and the memory it holds)."""
        if self._policy is not self._source:
            self._policy = None

    def __getstate__(self) -> dict[str, Any]:
        """A policy made by a factory travels to the worker as its factory only."""
        state = dict(self.__dict__)
        if state["_policy"] is not state["_source"]:
            state["_policy"] = None
        return state
