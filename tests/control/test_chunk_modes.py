"""`ChunkExecutor(mode=...)` named: each mode plays a late chunk as `align`/`blend_steps` do.

A mode is another way to say what `align` and `blend_steps` say, so a mode given by name must
play exactly like the options it stands for: naive from the first row however late, aligned
from the row for the tick the chunk arrives on, blended aligned and cross-faded.
"""

from __future__ import annotations

import numpy as np
import pytest

from vla_client.control import ChunkExecutor


def played_after_late_reply(executor, policy, observe, late):
    """(row, request) of the first 3 actions of a chunk that lands `late` ticks after it was
    asked for (on the first tick)."""
    assert [executor.tick(observe) for _ in range(late)] == [None] * late
    policy.release()
    assert executor.join(5)
    played = [executor.tick(observe) for _ in range(3)]
    policy.release()  # a request sent meanwhile is let through, never taken in
    return [(int(a[0]), int(a[1])) for a in played]


@pytest.mark.parametrize(
    "options", [{"mode": "naive"}, {"mode": "naive", "align": False}, {"align": False}]
)
def test_naive_plays_a_late_chunk_from_its_first_row(options, clock, observe, policy_type):
    policy = policy_type(gated=True)
    executor = ChunkExecutor(policy, clock=clock, monotonic=clock, **options)
    assert played_after_late_reply(executor, policy, observe, 3) == [(0, 1), (1, 1), (2, 1)]
    assert executor.source is not None and executor.source.row == 2


def test_naive_plays_a_chunk_whose_every_row_is_past(clock, observe, policy_type):
    policy = policy_type(horizon=3, gated=True)
    executor = ChunkExecutor(policy, mode="naive", clock=clock, monotonic=clock)
    assert played_after_late_reply(executor, policy, observe, 5) == [(0, 1), (1, 1), (2, 1)]
    assert executor.stats.dropped_late == 0


@pytest.mark.parametrize("options", [{"mode": "aligned"}, {}])
def test_aligned_skips_the_rows_whose_ticks_passed(options, clock, observe, policy_type):
    policy = policy_type(gated=True)
    executor = ChunkExecutor(policy, clock=clock, monotonic=clock, **options)
    assert played_after_late_reply(executor, policy, observe, 3) == [(3, 1), (4, 1), (5, 1)]


@pytest.mark.parametrize("options", [{"mode": "blended"}, {}])
def test_blended_fades_the_new_chunk_in_as_blend_steps_does(options, clock, observe, policy_type):
    policy = policy_type(gated=True)
    executor = ChunkExecutor(
        policy, prefetch_at=5, blend_steps=3, clock=clock, monotonic=clock, **options
    )
    executor.tick(observe)  # sends request 1
    policy.release()
    executor.join(5)
    played = [executor.tick(observe) for _ in range(5)]  # rows 1..5; the last sends request 2
    policy.release()
    executor.join(5)
    played += [executor.tick(observe) for _ in range(4)]  # request 2 from its row 1, faded in
    policy.release()
    # Old rows 6..8 fade into new rows 1..3 with new weights 1/4, 2/4, 3/4; then only the new.
    assert np.allclose([a[0] for a in played], [1, 2, 3, 4, 5, 4.75, 4.5, 4.25, 4])
    assert np.allclose([a[1] for a in played], [1, 1, 1, 1, 1, 1.25, 1.5, 1.75, 2])
