"""The three ways a late chunk is played: naive (from row 0), aligned (skip what passed),
blended (aligned, cross-faded from the old chunk), as `ChunkExecutor` does them."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from vla_client.client.result import ActionResult, Timings
from vla_client.control.chunk import ChunkExecutor
from vla_client.observation import Observation
from vla_client.sim.episode import EvalConfig

HORIZON = 8


class HeldPolicy:
    """Answers chunk n with rows ``100 * n + row`` once the test lets the reply through."""

    def __init__(self) -> None:
        self.replies = 0
        self.let_through = threading.Event()

    def __call__(self, observation: Observation) -> ActionResult:
        self.let_through.wait(10)
        self.let_through.clear()
        self.replies += 1
        rows = 100.0 * self.replies + np.arange(HORIZON, dtype=np.float32)
        return ActionResult(rows[:, None], f"r{self.replies}", Timings(0, 0, 0, 0, 0), {})


def observe() -> Observation:
    return Observation({"cam": np.zeros((4, 4, 3), np.uint8)})


def first_chunk_after(executor: ChunkExecutor, policy: HeldPolicy, late_ticks: int) -> float:
    """The first action of a chunk that arrives `late_ticks` ticks after it was asked for."""
    for _ in range(late_ticks):
        assert executor.tick(observe) is None
    policy.let_through.set()
    assert executor.join(10)
    action = executor.tick(observe)
    assert action is not None
    return float(action[0])


def test_naive_plays_a_late_chunk_from_its_first_row() -> None:
    policy = HeldPolicy()
    executor = ChunkExecutor(policy, clock=lambda: 0.0, align=False)
    assert first_chunk_after(executor, policy, 3) == 100.0
    assert executor.source is not None and executor.source.row == 0


def test_aligned_skips_the_rows_whose_ticks_passed() -> None:
    policy = HeldPolicy()
    executor = ChunkExecutor(policy, clock=lambda: 0.0)
    assert first_chunk_after(executor, policy, 3) == 103.0
    assert executor.source is not None and executor.source.row == 3


def test_naive_keeps_a_chunk_aligned_would_drop_as_all_past() -> None:
    late = HORIZON + 2
    policy = HeldPolicy()
    assert first_chunk_after(ChunkExecutor(policy, clock=lambda: 0.0, align=False), policy, late)
    policy = HeldPolicy()
    aligned = ChunkExecutor(policy, clock=lambda: 0.0)
    for _ in range(late):
        aligned.tick(observe)
    policy.let_through.set()
    aligned.join(10)
    aligned.tick(observe)
    assert aligned.stats.dropped_late == 1


@pytest.mark.parametrize(("align", "new_row"), [(True, 202.0), (False, 200.0)])
def test_blending_fades_from_what_was_left_of_the_old_chunk(align: bool, new_row: float) -> None:
    policy = HeldPolicy()
    executor = ChunkExecutor(policy, prefetch_at=4, blend_steps=2, clock=lambda: 0.0, align=align)
    first = first_chunk_after(executor, policy, 1)  # asked on tick 0, taken on tick 1
    played = [first] + [float(executor.tick(observe)[0]) for _ in range(4)]  # type: ignore[index]
    assert executor.in_flight  # asked on tick 4, with 4 actions left
    policy.let_through.set()
    assert executor.join(10)
    blended = [float(executor.tick(observe)[0]) for _ in range(3)]  # type: ignore[index]
    old = played[-1] + 1  # the old chunk's row for tick 6
    assert blended[0] == pytest.approx((2 / 3) * old + (1 / 3) * new_row)
    assert blended[1] == pytest.approx((1 / 3) * (old + 1) + (2 / 3) * (new_row + 1))
    assert blended[2] == pytest.approx(new_row + 2)


def test_the_eval_maps_modes_onto_the_executor() -> None:
    with pytest.raises(ValueError, match="mode must be one of 'naive', 'aligned', 'blended'"):
        EvalConfig(mode="late")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="rate_hz"):
        EvalConfig(rate_hz=float("inf"))
    for absurd in (1e300, 1e-300, float("nan")):  # a tick every 1e300 s, or 1e300 a second
        with pytest.raises(ValueError, match=r"rate_hz must be in 0.1..1000 Hz"):
            EvalConfig(rate_hz=absurd)
