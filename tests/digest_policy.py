"""A policy whose actions are the SHA-256 of the frames it received, to prove lossless delivery
with an oracle outside the code under test (`hashlib` on the test's own frames). A depth frame's
row hashes its dtype and shape too (`depth_bytes`), so the row proves the dtype arrived."""

from __future__ import annotations

import hashlib

import numpy as np

from vla_client.server.policy import Policy, PolicyInput, PolicySpec


def sha256_rows(frames: dict[str, np.ndarray], state: np.ndarray | None) -> np.ndarray:
    """One row per camera (sorted by name): the 32 bytes of its SHA-256, then the state's sum;
    a depth frame (2-D) hashed as `depth_bytes`."""
    extra = 0.0 if state is None else float(np.asarray(state, np.float64).sum())
    rows = [[*hashlib.sha256(_bytes(frames[name])).digest(), extra] for name in sorted(frames)]
    return np.asarray(rows, np.float32)


def depth_bytes(frame: np.ndarray) -> bytes:
    """What a depth frame's row hashes: its dtype (``<u2``, ``<f4``), its shape, its bytes."""
    return f"{frame.dtype.str}{frame.shape}".encode() + np.ascontiguousarray(frame).tobytes()


def _bytes(frame: np.ndarray) -> bytes:
    if frame.ndim == 2:
        return depth_bytes(frame)
    return np.ascontiguousarray(frame).tobytes()


class DigestPolicy(Policy):
    """Answers `sha256_rows` of what it was given; `camera_names`, `state_dim` and
    `depth_cameras` as announced."""

    def __init__(
        self,
        camera_names: tuple[str, ...] = (),
        state_dim: int | None = None,
        cameras: int = 2,
        depth_cameras: dict[str, str] | None = None,
    ) -> None:
        depth = dict(depth_cameras or {})
        self._spec = PolicySpec(
            family="digest",
            action_horizon=max(len(camera_names) + len(depth), cameras),
            action_dim=33,
            camera_names=camera_names,
            state_dim=state_dim,
            depth_cameras=depth,
        )

    @property
    def spec(self) -> PolicySpec:
        return self._spec

    def infer(self, observation: PolicyInput) -> np.ndarray:
        return sha256_rows(observation.images, observation.state)
