"""A policy that plays recorded action chunks back, for tests and demos.

The file is ``.npy`` (``[N, H, D]`` or one ``[H, D]`` chunk) or ``.npz`` with an ``actions``
array. Each request gets the next chunk, in order, wrapping around at the end, so a test can
predict every reply and a demo can drive a robot (or a simulator) along a recorded motion. A
request asking for a shorter horizon gets the first steps of the chunk. The file is read by
`vla_client.recording.load_action_chunks`, so ``vla-client send --save-actions`` output replays
as is.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from vla_client.recording import load_action_chunks
from vla_client.server.policy import Policy, PolicyInput, PolicySpec


class ReplayPolicy(Policy):
    """Plays recorded action chunks back, in order (the file at `path`, --replay-file)."""

    def __init__(self, path: str | Path, *, camera_names: tuple[str, ...] = ()) -> None:
        self.path = Path(path)
        chunks = load_action_chunks(self.path)
        self._chunks = chunks
        self._next = 0
        self._spec = PolicySpec(
            family="replay",
            action_horizon=int(chunks.shape[1]),
            action_dim=int(chunks.shape[2]),
            camera_names=camera_names,
            num_inference_steps=1,
        )

    @property
    def spec(self) -> PolicySpec:
        return self._spec

    def infer(self, observation: PolicyInput) -> np.ndarray:
        chunk = self._chunks[self._next % len(self._chunks)]
        self._next += 1
        horizon = observation.action_horizon or self._spec.action_horizon
        if horizon > self._spec.action_horizon:
            raise ValueError(
                f"action_horizon {horizon} is longer than the recorded chunks "
                f"({self._spec.action_horizon} steps)"
            )
        result: np.ndarray = chunk[:horizon].copy()
        return result
