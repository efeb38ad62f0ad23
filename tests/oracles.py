"""Expected values computed outside the code under test, for tests that check values.

A test that computes its expectation with the same code the server runs proves only that the
code agrees with itself: a digest over the wrong bytes, or a policy that reads the wrong
camera, passes. These oracles are written again from the definitions, in plain Python:

- `frame_sha256` / `frame_digest_of`: the digest a server must report for a frame, the SHA-256
  of the frame's C-order bytes (``np.ascontiguousarray(frame).tobytes()``), hashed here with
  `hashlib`, not with `vla_client.codecs.frame_digest`.
- `oracle_actions`: the reference policy's chunk, ``actions[h, d] = tanh(sum_i cos(d * i) *
  v_i + phase) * cos(0.1 * h * d)`` (d and i counted from 1), where ``v`` is each camera's mean
  R, G, B over 255 (cameras by name), then the state, and ``phase`` is the task's CRC-32 modulo
  1000 over 1000; a second implementation of what `ReferencePolicy` documents, in scalar loops.
"""

from __future__ import annotations

import binascii
import hashlib
import math
from collections.abc import Mapping
from typing import Any

import numpy as np


def frame_sha256(frame: np.ndarray) -> str:
    """SHA-256 (hex) of the frame's bytes in C order."""
    return hashlib.sha256(np.ascontiguousarray(frame).tobytes()).hexdigest()


def frame_digest_of(frame: np.ndarray) -> dict[str, object]:
    """The digest entry a server reports for an HxWx3 uint8 frame it decoded as `frame`."""
    assert frame.dtype == np.uint8, "digests here are of uint8 frames"
    return {"shape": list(frame.shape), "dtype": "|u1", "sha256": frame_sha256(frame)}


def oracle_actions(observation: Any, *, horizon: int, action_dim: int) -> np.ndarray:
    """The reference policy's chunk for anything with ``images``, ``state`` and ``task``."""
    return actions_for(
        observation.images, observation.state, observation.task or "", horizon, action_dim
    )


def actions_for(
    images: Mapping[str, np.ndarray],
    state: Any,
    task: str,
    horizon: int,
    action_dim: int,
) -> np.ndarray:
    """`oracle_actions` from its parts."""
    values: list[float] = []
    for name in sorted(images):
        frame = np.asarray(images[name])
        pixels = frame.shape[0] * frame.shape[1]
        for channel in range(3):
            values.append(int(frame[:, :, channel].astype(np.int64).sum()) / pixels / 255.0)
    if state is not None:
        values.extend(float(v) for v in np.asarray(state, dtype=np.float32).ravel())
    phase = (binascii.crc32(task.encode("utf-8")) % 1000) / 1000.0
    base = [
        math.tanh(sum(math.cos(d * i) * v for i, v in enumerate(values, start=1)) + phase)
        for d in range(1, action_dim + 1)
    ]
    rows = [[base[d - 1] * math.cos(0.1 * h * d) for d in range(1, action_dim + 1)]
            for h in range(horizon)]  # fmt: skip
    return np.array(rows, dtype=np.float32).reshape(horizon, action_dim)


def assert_actions_equal(actions: np.ndarray, expected: np.ndarray) -> None:
    """The chunk matches the oracle to float32 rounding."""
    assert actions.shape == expected.shape, (actions.shape, expected.shape)
    np.testing.assert_allclose(actions, expected, rtol=1e-5, atol=1e-6)
