"""The reference policy against its docstring: the chunk recomputed here with plain loops
(`expected`), its depth features, and its spec with every option set. Most tests read its replies
through a server; this file checks the formula itself, which those tests take on trust."""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest

from vla_client.server.policies import ReferencePolicy
from vla_client.server.policies.reference import depth_features, reference_actions
from vla_client.server.policy import PolicyInput


def expected(features: list[float], state: list[float], task: str, horizon: int, dim: int):
    """``actions[h, d] = tanh(sum_k cos((d+1)(k+1)) v_k + phase) * cos(0.1 h (d+1))``, with v the
    features over 255 then the state, and phase the task's CRC-32 mod 1000, over 1000."""
    vector = [f / 255.0 for f in features] + list(state)
    phase = (zlib.crc32(task.encode()) % 1000) / 1000.0
    rows = []
    for h in range(horizon):
        row = []
        for d in range(dim):
            total = sum(math.cos((d + 1) * (k + 1)) * v for k, v in enumerate(vector))
            row.append(math.tanh(total + phase) * math.cos(0.1 * h * (d + 1)))
        rows.append(row)
    return np.array(rows, dtype=np.float32)


def test_the_chunk_is_the_documented_function_of_colour_state_task_and_step() -> None:
    wrist = np.zeros((4, 6, 3), np.uint8)
    wrist[..., 0], wrist[..., 1], wrist[..., 2] = 10, 200, 90
    front = np.full((4, 6, 3), 51, np.uint8)
    state = np.array([0.5, -0.25], np.float32)
    observation = PolicyInput(images={"wrist": wrist, "front": front}, state=state,
                              task="pick the cube")  # fmt: skip
    chunk = reference_actions(observation, horizon=5, action_dim=3)
    assert chunk.dtype == np.float32 and chunk.shape == (5, 3)
    # cameras in name order: front, then wrist
    want = expected([51, 51, 51, 10, 200, 90], [0.5, -0.25], "pick the cube", 5, 3)
    np.testing.assert_allclose(chunk, want, rtol=1e-5, atol=1e-6)


def test_the_policy_uses_its_spec_or_the_horizon_asked() -> None:
    frame = {"front": np.full((2, 2, 3), 7, np.uint8)}
    policy = ReferencePolicy(action_horizon=4, action_dim=2)
    full = policy.infer(PolicyInput(images=frame))
    np.testing.assert_allclose(full, expected([7, 7, 7], [], "", 4, 2), rtol=1e-5, atol=1e-6)
    short = policy.infer(PolicyInput(images=frame, action_horizon=2))
    np.testing.assert_array_equal(short, full[:2])


def test_a_depth_camera_counts_its_known_distances_in_metres() -> None:
    millimetres = np.array([[0, 500], [1500, 1000]], np.uint16)  # 0: unknown
    assert depth_features(millimetres) == pytest.approx((1.0 * 255, 0.5 * 255, 1.5 * 255))
    metres = np.array([[np.nan, 2.0], [np.inf, 4.0], [-np.inf, 0.0]], np.float32)
    assert depth_features(metres) == pytest.approx((3.0 * 255, 2.0 * 255, 4.0 * 255))
    assert depth_features(np.zeros((2, 2), np.uint16)) == (0.0, 0.0, 0.0)
    assert depth_features(np.full((2, 2), np.nan, np.float32)) == (0.0, 0.0, 0.0)
    observation = PolicyInput(images={"depth": millimetres}, task="t")
    np.testing.assert_allclose(
        reference_actions(observation, horizon=2, action_dim=2),
        expected([1.0 * 255, 0.5 * 255, 1.5 * 255], [], "t", 2, 2), rtol=1e-5, atol=1e-6,
    )  # fmt: skip


def test_every_option_reaches_the_spec() -> None:
    default = ReferencePolicy().spec
    assert (default.family, default.action_horizon, default.action_dim) == ("reference", 16, 7)
    assert (default.camera_names, default.state_dim, default.num_inference_steps) == ((), None, 1)
    assert (default.image_size, default.image_size_required) == (None, False)
    assert (default.camera_aliases, default.depth_cameras) == ({}, {})
    aliases, depth = {"observation.images.top": "front"}, {"depth": "uint16"}
    spec = ReferencePolicy(
        action_horizon=8, action_dim=3, camera_names=["front", "top"], state_dim=5,  # type: ignore[arg-type]
        image_size=(np.int64(48), 64), image_size_required=True, camera_aliases=aliases,  # type: ignore[arg-type]
        depth_cameras=depth,
    ).spec  # fmt: skip
    assert (spec.action_horizon, spec.action_dim, spec.state_dim) == (8, 3, 5)
    assert spec.camera_names == ("front", "top") and isinstance(spec.camera_names, tuple)
    assert spec.image_size == (48, 64) and type(spec.image_size[0]) is int
    assert spec.image_size_required is True
    assert spec.camera_aliases == aliases and spec.camera_aliases is not aliases
    assert spec.depth_cameras == depth and spec.depth_cameras is not depth
