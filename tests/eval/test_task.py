"""The reach task: reproducible from its seed, success as it defines it, cameras at their sizes."""

from __future__ import annotations

import numpy as np
import pytest

from vla_client.tasks.reach import (
    MIN_START_DISTANCE_M,
    TOP_SIZE,
    WORKSPACE_M,
    WRIST_SIZE,
    ReachSettings,
    ReachTask,
)


def play(task: ReachTask, seed: int, actions: list[np.ndarray]) -> list[np.ndarray]:
    task.reset(seed)
    frames = []
    for action in actions:
        frames.append(np.concatenate([f.ravel() for f in task.frames().values()]))
        task.step(action)
    return frames


def test_the_same_seed_and_actions_give_the_same_frames_and_path() -> None:
    actions = [np.array([0.1 * k, 0.2]) for k in range(5)]
    first, second = ReachTask(), ReachTask()
    a, b = play(first, 3, actions), play(second, 3, actions)
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    assert np.array_equal(first.robot, second.robot)
    assert np.array_equal(first.target, second.target)
    other = play(ReachTask(), 4, actions)
    assert not np.array_equal(a[0], other[0])


def test_two_cameras_at_realistic_sizes_and_the_state_is_the_clock() -> None:
    task = ReachTask()
    frames = task.frames()
    assert {name: f.shape for name, f in frames.items()} == {
        "top": (*TOP_SIZE, 3),
        "wrist": (*WRIST_SIZE, 3),
    }
    assert all(f.dtype == np.uint8 for f in frames.values())
    task.step(None)
    task.step(None)
    assert task.state().tolist() == pytest.approx([0.2])


def test_start_positions_are_apart_and_the_target_moves_and_stays_on_the_table() -> None:
    task = ReachTask(ReachSettings(target_speed_mps=(0.5, 0.5)))
    for seed in range(20):
        task.reset(seed)
        assert task.distance_m >= MIN_START_DISTANCE_M
        start = task.target.copy()
        for _ in range(40):
            task.step(None)
            assert (task.target >= 0).all() and (task.target <= WORKSPACE_M).all()
        assert not np.array_equal(task.target, start)


def test_the_robot_moves_at_most_its_speed_limit_towards_its_goal() -> None:
    task = ReachTask(ReachSettings(max_speed_mps=0.3, rate_hz=10))
    task.reset(0)
    start = task.robot.copy()
    task.step(start + np.array([1.0, 0.0]))
    assert task.robot - start == pytest.approx([0.03, 0.0])
    near = task.robot + np.array([0.0, 0.01])
    task.step(near)
    assert task.robot == pytest.approx(near)


def test_success_needs_hold_steps_in_a_row_within_the_radius() -> None:
    settings = ReachSettings(hold_steps=3, target_speed_mps=(0.0, 0.0), max_speed_mps=100)
    task = ReachTask(settings)
    task.reset(1)
    for _ in range(2):
        task.step(task.target)
    assert not task.success and not task.done
    task.step(task.target + np.array([0.05, 0.0]))  # one step out: the count starts again
    assert task.held == 0
    for _ in range(3):
        task.step(task.target)
    assert task.success and task.done
    assert task.episode_return < 0


def test_an_episode_ends_at_its_duration() -> None:
    task = ReachTask(ReachSettings(duration_s=1.0, rate_hz=10))
    task.reset(0)
    for _ in range(10):
        assert not task.done
        task.step(None)
    assert task.done and not task.success


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("rate_hz", 0),
        ("duration_s", float("nan")),
        ("success_radius_m", -1),
        ("hold_steps", 0),
        ("max_speed_mps", float("inf")),
        ("target_speed_mps", (0.2, 0.1)),
    ],
)
def test_settings_are_checked(option: str, value: object) -> None:
    with pytest.raises(ValueError, match=option.split("_mps")[0]):
        ReachSettings(**{option: value})  # type: ignore[arg-type]


def test_bad_actions_and_seeds_are_refused() -> None:
    task = ReachTask()
    with pytest.raises(ValueError, match="finite \\[2\\] position"):
        task.step(np.array([np.nan, 0.0]))
    with pytest.raises(ValueError, match="finite \\[2\\] position"):
        task.step(np.zeros(3))
    with pytest.raises(ValueError, match="seed"):
        task.reset(-1)
