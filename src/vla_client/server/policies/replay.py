"""A policy that plays recorded action chunks back, for tests and demos.

The file is ``.npy`` (``[N, H, D]`` or one ``[H, D]`` chunk) or ``.npz`` with an ``actions``
array. Each request gets the next chunk, in order, wrapping around at the end, so a test can
predict every reply and a demo can drive a robot (or a simulator) along a recorded motion. A
request asking for a shorter horizon gets the first steps of the chunk.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from vla_client.server.policy import Policy, PolicyInput, PolicySpec


class ReplayPolicy(Policy):
    """Returns the recorded chunks of `path` one after another."""

    def __init__(self, path: str | Path, *, camera_names: tuple[str, ...] = ()) -> None:
        self.path = Path(path)
        chunks = load_chunks(self.path)
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


def load_chunks(path: Path) -> np.ndarray:
    """The ``[N, H, D]`` float32 chunks recorded in `path`. Raises `ValueError`."""
    try:
        loaded = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read action chunks from {path}: {exc}") from None
    if isinstance(loaded, np.lib.npyio.NpzFile):
        with loaded:
            if "actions" not in loaded.files:
                raise ValueError(f"{path} has no 'actions' array (it has {loaded.files})")
            array = loaded["actions"]
    else:
        array = loaded
    if array.ndim == 2:
        array = array[None]
    if array.ndim != 3 or 0 in array.shape or array.dtype.kind not in "iuf":
        raise ValueError(
            f"{path}: expected numeric chunks [N, H, D], got {array.dtype} {array.shape}"
        )
    chunks = np.ascontiguousarray(array, dtype=np.float32)
    if not np.isfinite(chunks).all():
        raise ValueError(f"{path}: the chunks contain NaN or infinity")
    return chunks
