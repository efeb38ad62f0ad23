"""The test oracles agree with values worked out by hand, and the server agrees with them."""

from __future__ import annotations

import hashlib
import math

import numpy as np

from oracles import assert_actions_equal, frame_digest_of, frame_sha256, oracle_actions
from vla_client import ActionClient, Observation

# Two red pixels over two black ones: mean R = 127.5, G = B = 0, so v = [0.5, 0, 0].
TINY = np.array([[[255, 0, 0], [0, 0, 0]], [[255, 0, 0], [0, 0, 0]]], dtype=np.uint8)


def by_hand(state: list[float], task_crc: int) -> np.ndarray:
    """The reference chunk for TINY, horizon 3, action dim 2, worked out term by term."""
    phase = (task_crc % 1000) / 1000
    v = [0.5, 0.0, 0.0, *state]
    base = [math.tanh(sum(math.cos(d * i) * x for i, x in enumerate(v, 1)) + phase) for d in (1, 2)]
    return np.array(
        [
            [base[0], base[1]],
            [base[0] * math.cos(0.1), base[1] * math.cos(0.2)],
            [base[0] * math.cos(0.2), base[1] * math.cos(0.4)],
        ],
        dtype=np.float32,
    )


def test_the_digest_oracle_hashes_c_order_bytes() -> None:
    frame = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
    assert frame_sha256(frame) == hashlib.sha256(bytes(range(18))).hexdigest()
    fortran = np.asfortranarray(frame)
    assert frame_sha256(fortran) == frame_sha256(frame)  # the pixels, not the memory layout
    assert frame_digest_of(frame) == {
        "shape": [2, 3, 3], "dtype": "|u1", "sha256": hashlib.sha256(bytes(range(18))).hexdigest()
    }  # fmt: skip


def test_the_action_oracle_matches_the_hand_computation() -> None:
    observation = Observation({"cam": TINY}, state=[0.25], task="")
    expected = by_hand([0.25], task_crc=0)  # crc32(b"") == 0
    assert_actions_equal(oracle_actions(observation, horizon=3, action_dim=2), expected)
    assert expected[0, 0] == np.float32(math.tanh(0.5 * math.cos(1) + 0.25 * math.cos(4)))


def test_the_server_computes_the_hand_worked_chunk(server_url: str) -> None:
    observation = Observation({"cam": TINY}, state=[0.25, -1.0], task="pick")
    with ActionClient(server_url, encoding="raw", wire="msgpack", check_contract=False) as client:
        result = client.infer(observation, action_horizon=3)
    # crc32(b"pick") = 0x99CD0F9B = 2580352923, so the phase is 0.923.
    hand = by_hand([0.25, -1.0], task_crc=2580352923)
    chunk = result.actions[:, :2]
    assert_actions_equal(chunk, hand)
    assert_actions_equal(result.actions, oracle_actions(observation, horizon=3, action_dim=7))
