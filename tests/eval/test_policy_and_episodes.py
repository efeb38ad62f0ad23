"""The reach policy from pixels, and whole episodes through a real server and client."""

from __future__ import annotations

import numpy as np
import pytest

from vla_client.client import ActionClient
from vla_client.codecs import decode_image_bytes, encode_jpeg
from vla_client.server.policies.reach import (
    MARKER_REACH_M,
    ROBOT_HUE,
    TARGET_HUE,
    ReachPolicy,
    find_marker,
)
from vla_client.server.policy import PolicyInput
from vla_client.sim.episode import EvalConfig, run_episode
from vla_client.sim.network import NetworkDelay
from vla_client.tasks.reach import TOP_PX_PER_M, ReachTask

REACH_PX = MARKER_REACH_M * TOP_PX_PER_M


@pytest.mark.parametrize("lossy", [False, True])
def test_the_policy_finds_target_and_robot_in_the_pixels(lossy: bool) -> None:
    task = ReachTask()
    for seed in range(8):
        task.reset(seed)
        for _ in range(5):
            top = task.frames()["top"]
            if lossy:
                top = decode_image_bytes(encode_jpeg(top, 75))
            target = find_marker(top, TARGET_HUE, REACH_PX)
            robot = find_marker(top, ROBOT_HUE, REACH_PX)
            assert target is not None and robot is not None
            assert np.linalg.norm(target / TOP_PX_PER_M - task.target) < 0.004
            assert np.linalg.norm(robot / TOP_PX_PER_M - task.robot) < 0.004
            task.step(task.robot + 0.05)


def test_the_policy_predicts_where_the_target_goes() -> None:
    task, policy = ReachTask(), ReachPolicy(action_horizon=6)
    task.reset(2)
    for _ in range(4):  # two looks, some time apart, give it the target's velocity
        chunk = policy.infer(PolicyInput(task.frames(), task.state(), task.task))
        for _ in range(3):
            task.step(None)
    assert chunk.shape == (6, 2) and chunk.dtype == np.float32
    future = ReachTask()
    future.reset(2)
    for _ in range(9 + 6):
        future.step(None)
    # row 5 aims at where the target is 6 steps after the last observation
    assert np.linalg.norm(chunk[5] - future.target) < 0.01


def test_a_frame_without_the_markers_is_an_error_not_a_guess() -> None:
    blank = {"top": np.zeros((360, 640, 3), np.uint8), "wrist": np.zeros((224, 224, 3), np.uint8)}
    with pytest.raises(ValueError, match="the top camera shows no target or robot"):
        ReachPolicy().infer(PolicyInput(blank, np.zeros(1, np.float32)))


def episodes(url: str, mode: str, delay_s: float, seeds: range, encoding: str = "png") -> list:
    config = EvalConfig(mode=mode, delay=NetworkDelay(delay_s))  # type: ignore[arg-type]
    with ActionClient(url, encoding=encoding) as client:  # type: ignore[arg-type]
        task = ReachTask()
        return [run_episode(task, client.infer, s, config, round_trip_s=0.02) for s in seeds]


def test_the_policy_solves_the_task_at_zero_delay(reach_url: str) -> None:
    results = episodes(reach_url, "aligned", 0.0, range(6))
    assert [r.error for r in results] == [None] * 6
    assert all(r.success for r in results)
    assert all(r.chunks >= 1 and r.staleness_ticks == 1.0 for r in results)


def test_simulated_time_gives_the_same_episodes_twice(reach_url: str) -> None:
    def outcomes() -> list[tuple[bool, int, float, int]]:
        runs = episodes(reach_url, "naive", 0.1, range(3), encoding="jpeg")
        return [(r.success, r.steps, r.episode_return, r.requests) for r in runs]

    assert outcomes() == outcomes()


def test_staleness_counts_the_ticks_of_the_delay(reach_url: str) -> None:
    # 20 ms round trip + 2 x 100 ms at 10 Hz: due after 220 ms, taken on the tick at 300 ms
    (result,) = episodes(reach_url, "aligned", 0.1, range(1))
    assert result.staleness_ticks == 3.0
    assert result.observation_to_action_ms == pytest.approx(300.0)
