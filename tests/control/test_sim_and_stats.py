"""SimRobot integrates what it is given; percentiles summarise samples."""

from __future__ import annotations

import math

import numpy as np
import pytest

from vla_client.control import SimRobot, percentiles


def test_sim_integrates_velocity_actions():
    robot = SimRobot(action_dim=2, dt=0.1)
    robot.apply([1.0, -2.0])
    robot.apply([1.0, 0.0])
    assert np.allclose(robot.position, [0.2, -0.2])
    assert robot.steps == 2


def test_sim_refuses_an_action_of_the_wrong_size():
    with pytest.raises(ValueError):
        SimRobot(action_dim=2, dt=0.1).apply([1.0, 2.0, 3.0])


def test_sim_observation_carries_state_frames_and_capture_times(clock):
    seen_steps = []

    def frames(t):
        seen_steps.append(t)
        return {"left": np.full((8, 8, 3), t, np.uint8), "right": np.zeros((8, 8, 3), np.uint8)}

    robot = SimRobot(action_dim=3, dt=0.5, frames=frames, task="stack", clock=clock)
    robot.apply([2.0, 0.0, 0.0])
    observation = robot.observe()
    assert seen_steps == [1]
    assert observation.task == "stack"
    assert np.allclose(observation.state, [1.0, 0.0, 0.0])
    assert observation.capture_times == {"left": clock(), "right": clock()}
    assert observation.images["left"][0, 0, 0] == 1


def test_percentiles_of_known_samples():
    summary = percentiles(float(v) for v in range(1, 101))
    assert summary.count == 100
    assert summary.p50 == pytest.approx(50.5)
    assert summary.p90 == pytest.approx(90.1)
    assert summary.p99 == pytest.approx(99.01)
    assert summary.max == 100
    assert "p99=99.01" in str(summary)


def test_percentiles_of_nothing_are_nan():
    summary = percentiles([])
    assert summary.count == 0
    assert math.isnan(summary.p50) and math.isnan(summary.max)
