"""Flow-matching policies, and real-time chunking's guidance for any of them.

A flow-matching policy turns noise into a chunk by integrating a learned velocity field: with
``x(0)`` Gaussian noise, ``x(1)`` is the chunk (in the policy's own normalised units) and
``dx/dtau = v(x, tau, observation)``. A subclass of `FlowPolicy` says only what the field is
(`velocity`, and `velocity_vjp` for guidance) and how its units relate to the robot's; this
module integrates it, with or without real-time chunking.

Real-time chunking (Black et al. 2025, arXiv 2506.07339) inpaints the new chunk so that it
continues the one the robot is executing. At each integration step the guidance looks at the
clean chunk the field predicts, ``x + (1 - tau) v``, compares it with the prefix (what the robot
will still execute of the old chunk, normalised by the policy), and adds to the velocity the
gradient that pulls the prediction towards the prefix, weighted per row by a soft mask:

- rows ``i < d`` (executed while the request was in flight): weight 1;
- rows ``d <= i < end`` with ``end = min(P, H - s)``: ``c (e^c - 1) / (e - 1)`` with
  ``c = (end - i) / (end - d + 1)``, fading from about 1 to about 0 (the paper's exponential
  schedule);
- later rows: 0, free to follow the new observation.

The guidance weight at time tau is ``min(beta, (1 - tau) / (tau r^2))`` with
``r^2 = (1 - tau)^2 / (tau^2 + (1 - tau)^2)`` (the paper's ΠGDM form), clipped at the maximum
guidance weight ``beta``. The rows below d are executed whatever the reply says, so the chunk
returned carries the prefix itself there.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

import numpy as np

from vla_client.protocol.rtc import OPENPI_KEYS, RTCRequest
from vla_client.server.policy import Policy, PolicyInput

MAX_GUIDANCE_WEIGHT = 5.0
"""The clip on the guidance weight (beta), chosen by measurement: LeRobot defaults to 10, and on
`reach-flow` 10 held the robot to stale plans near the target (one episode in six failed at
200 ms one way, against none at 5 and at 3)."""
SCHEDULE = "exp"


def prefix_weights(delay: int, end: int, horizon: int) -> np.ndarray:
    """The soft mask over `horizon` rows: 1 below `delay`, the exponential fade up to `end`,
    0 from there (see the module's docstring)."""
    rows = np.arange(horizon, dtype=np.float64)
    delay = min(delay, end)
    ramp = (end - rows) / (end - delay + 1)
    weights = ramp * np.expm1(ramp) / np.expm1(1.0)
    weights = np.where(rows < delay, 1.0, weights)
    return np.where(rows >= end, 0.0, weights)


def guidance_weight(tau: float, beta: float) -> float:
    """``min(beta, (1 - tau) / (tau r^2))``; beta at tau = 0, where the bound is infinite."""
    if tau <= 0.0:
        return beta
    r2 = (1 - tau) ** 2 / (tau**2 + (1 - tau) ** 2)
    return min(beta, (1 - tau) / (tau * r2)) if r2 > 0 else 0.0


def rtc_capability(max_guidance_weight: float = MAX_GUIDANCE_WEIGHT) -> dict[str, Any]:
    """The ``capabilities.rtc`` object a server running a `FlowPolicy` announces."""
    return {
        "supported": True,
        "guidance": "soft_mask_pigdm",
        "schedule": SCHEDULE,
        "max_guidance_weight": max_guidance_weight,
        "parameters": ["prefix_actions", "inference_delay_steps", "execution_horizon"],
        "openpi_keys": list(OPENPI_KEYS),
    }


class FlowPolicy(Policy):
    """A policy whose chunk is the end of a flow; it does real-time chunking on request.

    A subclass gives `condition` (what the field needs of one observation, computed once per
    request), `velocity` and `velocity_vjp` (the field and its vector-Jacobian product in x),
    and `to_policy_units` / `to_robot_units` (its normalisation of actions, which may depend on
    the observation). `num_steps` Euler steps integrate the flow; `max_guidance_weight` clips
    the guidance. Its spec must announce `rtc_capability()` among its capabilities.
    """

    num_steps: int = 10
    max_guidance_weight: float = MAX_GUIDANCE_WEIGHT

    @abstractmethod
    def condition(self, observation: PolicyInput) -> Any:
        """What the velocity field and the unit conversions need of `observation`."""

    @abstractmethod
    def velocity(self, x: np.ndarray, tau: float, condition: Any) -> np.ndarray:
        """The field at `x` ``[H, D]`` (policy units) and time `tau` in [0, 1)."""

    @abstractmethod
    def velocity_vjp(
        self, x: np.ndarray, tau: float, condition: Any, cotangent: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """The field at `x`, and ``cotangent`` times its Jacobian in `x` (both ``[H, D]``)."""

    @abstractmethod
    def to_policy_units(self, actions: np.ndarray, condition: Any) -> np.ndarray:
        """Robot-unit rows ``[P, D]`` (row 0 the observation's tick) in policy units."""

    @abstractmethod
    def to_robot_units(self, x: np.ndarray, condition: Any) -> np.ndarray:
        """Policy-unit rows in robot units: the inverse of `to_policy_units`."""

    def infer(self, observation: PolicyInput) -> np.ndarray:
        """One chunk: noise integrated along the field, guided by `observation.rtc` if set."""
        spec = self.spec
        condition = self.condition(observation)
        rng = np.random.default_rng(observation.seed)
        # The whole announced chunk is generated (a field is trained for one length) and cut
        # to the request's horizon at the end.
        noise = rng.standard_normal((spec.action_horizon, spec.action_dim))
        steps = observation.num_inference_steps or self.num_steps
        rtc = observation.rtc
        if rtc is None:
            x = self.integrate(noise, condition, steps)
            chunk = self.to_robot_units(x, condition)
        else:
            prefix = rtc.prefix_actions[: spec.action_horizon].astype(np.float64)
            x = self.guided(noise, condition, steps, rtc, self.to_policy_units(prefix, condition))
            chunk = self.to_robot_units(x, condition)
            frozen = min(rtc.inference_delay_steps, len(prefix))
            chunk[:frozen] = prefix[:frozen]  # executed while this was computed, whatever it says
        return chunk[: observation.action_horizon or spec.action_horizon]

    def integrate(self, noise: np.ndarray, condition: Any, steps: int) -> np.ndarray:
        """Euler integration of the field from `noise` at tau 0 to tau 1."""
        x = noise.astype(np.float64)
        for step in range(steps):
            x = x + self.velocity(x, step / steps, condition) / steps
        return x

    def guided(
        self,
        noise: np.ndarray,
        condition: Any,
        steps: int,
        rtc: RTCRequest,
        target: np.ndarray,
    ) -> np.ndarray:
        """Euler integration with RTC's guidance towards `target` (the prefix in policy
        units, ``[P, D]``) on the rows the soft mask weighs."""
        horizon = len(noise)
        prefix_steps = len(target)
        end = min(prefix_steps, max(0, horizon - rtc.execution_horizon))
        end = max(end, min(rtc.inference_delay_steps, prefix_steps))
        mask = prefix_weights(rtc.inference_delay_steps, end, horizon)[:, None]
        padded = np.zeros_like(noise, dtype=np.float64)
        padded[:prefix_steps] = target
        x = noise.astype(np.float64)
        for step in range(steps):
            tau = step / steps
            v = self.velocity(x, tau, condition)
            error = mask * (padded - (x + (1 - tau) * v))
            _, pulled = self.velocity_vjp(x, tau, condition, error)
            gradient = error + (1 - tau) * pulled  # error times d(x + (1 - tau) v)/dx
            x = x + (v + guidance_weight(tau, self.max_guidance_weight) * gradient) / steps
        return x
