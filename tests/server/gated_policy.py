"""A policy that holds requests until the test lets them go (imported by the worker process too).

A request whose task is ``wait:<path>`` stays in the policy until the file `path` exists (ten
seconds at most), so a test can keep a known number of requests in flight, and then release
them all by creating the file.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from vla_client.server import PolicyInput, ReferencePolicy

WAIT_LIMIT_S = 10.0


class GatedPolicy(ReferencePolicy):
    """`ReferencePolicy`, except that ``wait:<path>`` tasks wait for `path` to exist."""

    def infer(self, observation: PolicyInput) -> np.ndarray:
        if observation.task.startswith("wait:"):
            gate = Path(observation.task.removeprefix("wait:"))
            deadline = time.monotonic() + WAIT_LIMIT_S
            while not gate.exists() and time.monotonic() < deadline:
                time.sleep(0.005)
        return super().infer(observation)
