"""Which replies' actions `ChunkExecutor` plays: any [H, D] chunk with H, D >= 1 and the action
dim of the chunk before; anything else is dropped, counted and named, and the robot plays on."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from vla_client.control import ChunkExecutor
from vla_client.control.chunk import PAST_HINT


def reshaped(policy, actions_of):
    """`policy`, with each reply's actions replaced by ``actions_of(request number, actions)``."""

    def infer(observation):
        result = policy(observation)
        return replace(result, actions=actions_of(len(policy.requests), result.actions))

    return infer


def test_a_one_wide_action_and_a_one_row_chunk_are_played(clock, observe, policy_type):
    """A gripper alone is one number an action; a naive executor plays a 1-row chunk."""
    policy = policy_type(horizon=3)
    one_wide = ChunkExecutor(
        reshaped(policy, lambda n, actions: actions[:, :1]), clock=clock, monotonic=clock
    )
    one_wide.tick(observe)
    one_wide.join(5)
    assert [one_wide.tick(observe).tolist() for _ in range(2)] == [[1.0], [2.0]]
    one_row = ChunkExecutor(
        reshaped(policy, lambda n, actions: actions[:1]), mode="naive", clock=clock, monotonic=clock
    )
    one_row.tick(observe)
    one_row.join(5)
    assert one_row.tick(observe).tolist() == [0.0, 2.0]  # row 0 of the second request
    assert (one_wide.stats.malformed_replies, one_row.stats.malformed_replies) == (0, 0)


def test_a_chunk_of_another_action_dim_is_dropped_while_the_old_one_plays_on(
    clock, observe, policy_type
):
    """Without blending nothing mixes the two chunks, and the new one is still refused: a robot
    must never be handed actions of another size mid-run."""
    policy = policy_type(horizon=4)
    wider = reshaped(policy, lambda n, a: a if n == 1 else np.concatenate([a, a[:, :1]], axis=1))
    executor = ChunkExecutor(wider, prefetch_at=3, clock=clock, monotonic=clock)
    played = []
    for _ in range(4):
        played.append(executor.tick(observe))
        executor.join(5)
    assert [a.tolist() for a in played[1:]] == [[1, 1], [2, 1], [3, 1]]
    assert str(executor.last_error) == "action dim changed from 2 to 3"
    assert executor.stats.chunks_received == 1
    assert executor.stats.malformed_replies == 2  # requests 2 and 3, asked on ticks 1 and 2


def test_every_malformed_reply_is_counted_and_named(clock, observe, policy_type):
    replies = [[[1.0, "x"]], [[1.0, 2.0], [3.0]], np.zeros((0, 2)), np.zeros((2, 0, 1))]
    policy = policy_type()
    bad_then_good = reshaped(policy, lambda n, a: replies[n - 1] if n <= len(replies) else a)
    executor = ChunkExecutor(bad_then_good, clock=clock, monotonic=clock)
    executor.tick(observe)
    executor.join(5)
    errors = []
    for _ in replies:  # each tick takes a reply in, refuses it, and asks again
        assert executor.tick(observe) is None
        errors.append(str(executor.last_error))
        executor.join(5)
    assert errors[0] == "actions are not a numeric array: could not convert string to float: 'x'"
    assert errors[1].startswith("actions are not a numeric array: ")
    assert errors[2:] == [
        "expected an action chunk [H, D], got shape (0, 2)",
        "expected an action chunk [H, D], got shape (2, 0, 1)",
    ]
    assert executor.stats.malformed_replies == len(replies)
    assert executor.tick(observe) is not None  # the next good reply is played
    assert executor.stats.chunks_received == 1


@pytest.mark.parametrize("blend_steps", [0, 2])
def test_the_action_dim_is_checked_whether_or_not_chunks_are_blended(
    blend_steps, clock, observe, policy_type
):
    policy = policy_type(horizon=6)
    narrower = reshaped(policy, lambda n, actions: actions if n == 1 else actions[:, :1])
    executor = ChunkExecutor(
        narrower, prefetch_at=4, blend_steps=blend_steps, clock=clock, monotonic=clock
    )
    for _ in range(4):
        executor.tick(observe)
        executor.join(5)
    assert str(executor.last_error) == "action dim changed from 2 to 1"


@pytest.mark.parametrize("mode", ["aligned", "blended"])
def test_a_one_row_chunk_is_all_past_when_it_lands_and_the_log_says_to_play_naive(
    clock, observe, policy_type, mode, caplog
):
    """A one-action policy (OpenVLA's horizon is 1) gives a row for the tick its observation
    was taken; the reply lands a tick later at least, so outside mode 'naive' every one is
    dropped, and the warning says why and what plays them."""
    policy = policy_type(horizon=3)
    options = {"blend_steps": 1} if mode == "blended" else {}
    executor = ChunkExecutor(
        reshaped(policy, lambda n, actions: actions[:1]), mode=mode, clock=clock, monotonic=clock,
        **options,
    )  # fmt: skip
    with caplog.at_level("WARNING", logger="vla_client.control.chunk"):
        for _ in range(3):
            executor.tick(observe)
            executor.join(5)
    assert executor.stats.chunks_received == 0
    assert executor.stats.dropped_late >= 2
    messages = [record.getMessage() for record in caplog.records]
    assert any(
        message.endswith(f"ticks old; all its actions are past: {PAST_HINT})")
        for message in messages
    ), messages
