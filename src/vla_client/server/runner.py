"""Runners execute a policy for the HTTP entrypoint without blocking its event loop.

`ThreadRunner` calls the policy in a worker thread of the same process. The entrypoint only
ever hands a runner a `PolicyInput` of arrays, so a runner that moves work to another process
can do so without pickling object trees.
"""

from __future__ import annotations

import time
from typing import Protocol

import numpy as np
from starlette.concurrency import run_in_threadpool

from vla_client.server.policy import Policy, PolicyInput


class Runner(Protocol):
    """Runs one observation through the policy; returns the chunk and stage timings in ms."""

    async def infer(self, observation: PolicyInput) -> tuple[np.ndarray, dict[str, float]]:
        """Action chunk ``[H, D]`` and timings such as ``inference_ms``."""

    async def close(self) -> None:
        """Stop workers and free resources."""


class ThreadRunner:
    """Runs the policy in a thread of the entrypoint process (the simple, in-process layout)."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy

    async def infer(self, observation: PolicyInput) -> tuple[np.ndarray, dict[str, float]]:
        start = time.perf_counter()
        actions = await run_in_threadpool(self.policy.infer, observation)
        return actions, {"inference_ms": (time.perf_counter() - start) * 1000}

    async def close(self) -> None:
        self.policy.close()
