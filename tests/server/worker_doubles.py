"""Policies that fail on purpose, for the worker fault tests (imported by the worker process too).

The task text picks the behaviour, so one server can be driven through every fault in turn.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Sequence

import numpy as np

from vla_client.server import PolicyInput, ReferencePolicy
from vla_client.server.policy import Policy, PolicySpec


class FaultyPolicy(ReferencePolicy):
    """``crash`` exits, ``raise`` raises, ``sleep:S`` sleeps; ``chunk[0, 0]`` is the batch size."""

    def infer_batch(self, observations: Sequence[PolicyInput]) -> list[np.ndarray]:
        for observation in observations:
            if observation.task == "crash":
                os._exit(3)
            if observation.task == "raise":
                raise RuntimeError("boom")
            if observation.task.startswith("sleep:"):
                time.sleep(float(observation.task.split(":", 1)[1]))
        chunks = [self.infer(observation) for observation in observations]
        for chunk in chunks:
            chunk[0, 0] = len(observations)
        return chunks


class ThreadReport(Policy):
    """Answers one row, ``[torch.get_num_threads(), os.getpid()]``, as the worker's torch sees
    it: what the thread tests read back from the worker process itself."""

    @property
    def spec(self) -> PolicySpec:
        return PolicySpec(family="thread-report", action_horizon=1, action_dim=2)

    def load(self) -> None:
        import torch  # noqa: F401  (loads OpenMP in the worker, as a torch policy does)

    def infer(self, observation: PolicyInput) -> np.ndarray:
        import torch

        return np.array([[torch.get_num_threads(), os.getpid()]], np.float32)


class SlowToReap(subprocess.Popen[bytes]):
    """A real process whose every bounded `wait` times out, as on a machine too busy to reap
    it in time; an unbounded `wait` (the test's own clean-up) works."""

    timeouts = 0

    def wait(self, timeout: float | None = None) -> int:
        if timeout is None:
            return super().wait()
        SlowToReap.timeouts += 1
        raise subprocess.TimeoutExpired(self.args, timeout)
