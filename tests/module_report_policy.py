"""A policy that reports which modules are loaded in the process that runs it."""

from __future__ import annotations

import sys

import numpy as np

from vla_client.server.policy import Policy, PolicyInput, PolicySpec

WATCHED = (
    "fastapi", "starlette", "uvicorn", "httpx", "websockets", "torch",
    "vla_client.client", "vla_client.transports", "vla_client.cli", "vla_client.server.app",
)  # fmt: skip


class ModuleReportPolicy(Policy):
    """``actions[0, i]`` is 1.0 when ``WATCHED[i]`` is imported where the policy runs, else 0."""

    @property
    def spec(self) -> PolicySpec:
        return PolicySpec(family="module-report", action_horizon=1, action_dim=len(WATCHED))

    def infer(self, observation: PolicyInput) -> np.ndarray:
        return np.array([[float(name in sys.modules) for name in WATCHED]], np.float32)
