"""ControlLoop(record=): each applied action with the observation of its tick, the robot read
once a tick, into a recording that keeps both (and the episode) for a dataset."""

from __future__ import annotations

import numpy as np
import pytest

from vla_client.control import ChunkExecutor, ControlLoop, SafetyGate
from vla_client.observation import Observation
from vla_client.recording import ObservationWriter, load_observations


class CountingRobot:
    """`observe` numbers each reading in its state: ``[n, 0]`` for the n-th (from 0)."""

    def __init__(self) -> None:
        self.observations: list[Observation] = []

    def observe(self) -> Observation:
        frame = np.full((4, 4, 3), len(self.observations), np.uint8)
        observation = Observation({"wrist": frame}, state=[len(self.observations), 0.0])
        self.observations.append(observation)
        return observation


def loop_for(clock, executor, robot, applied, **options) -> ControlLoop:  # type: ignore[no-untyped-def]
    return ControlLoop(
        observe=robot.observe, executor=executor, apply_action=applied.append, rate_hz=10,
        sleep=clock.advance, **options,
    )  # fmt: skip


def test_each_applied_action_is_recorded_with_the_observation_of_its_tick(
    clock, policy_type, observe
):
    policy = policy_type(horizon=100)
    executor = ChunkExecutor(policy, clock=clock, monotonic=clock)
    executor.tick(observe)  # the first chunk in hand: every tick below has an action
    executor.join(5)
    robot, applied, recorded = CountingRobot(), [], []
    gate = SafetyGate(low=[0, 0], high=[4, 10], on_bounds="clip")
    loop = loop_for(clock, executor, robot, applied, gate=gate,
                    record=lambda o, a: recorded.append((o, a)))  # fmt: skip
    stats = loop.run(ticks=6)
    assert stats.applied == 6 and len(robot.observations) == 6  # read once a tick
    assert [o for o, _ in recorded] == robot.observations
    assert [a for _, a in recorded] == applied  # the gate's output, what the robot got
    assert [float(a[0]) for _, a in recorded] == [1, 2, 3, 4, 4, 4]


def test_idle_ticks_record_nothing_and_the_executor_sends_the_ticks_own_reading(clock, policy_type):
    policy = policy_type(gated=True)
    robot, applied, recorded = CountingRobot(), [], []
    loop = loop_for(clock, ChunkExecutor(policy, clock=clock, monotonic=clock), robot, applied,
                    record=lambda o, a: recorded.append((o, a)))  # fmt: skip
    stats = loop.run(ticks=4)
    policy.release()
    assert (stats.idle, recorded, applied) == (4, [], [])
    assert len(robot.observations) == 4
    assert policy.observations == [robot.observations[0]]  # not a second read of the robot


@pytest.mark.parametrize("record", ["file.vlaobs", 3, object()])
def test_a_record_that_is_not_callable_is_refused(clock, policy_type, record) -> None:
    executor = ChunkExecutor(policy_type(), clock=clock, monotonic=clock)
    with pytest.raises(ValueError, match=r"record must be a callable taking \(observation, action"):
        loop_for(clock, executor, CountingRobot(), [], record=record)


def test_a_writers_record_keeps_the_applied_actions_and_the_episodes(
    tmp_path, clock, policy_type, observe
):
    path = tmp_path / "run.vlaobs"
    robot, applied = CountingRobot(), []
    with ObservationWriter(path, fps=10) as writer:
        for episode in range(2):
            assert writer.episode == episode
            executor = ChunkExecutor(policy_type(horizon=100), clock=clock, monotonic=clock)
            executor.tick(observe)
            executor.join(5)
            loop_for(clock, executor, robot, applied, record=writer.record).run(ticks=3)
            assert writer.next_episode() == episode + 1
    steps = load_observations(path)
    assert [step.episode for step in steps] == [0, 0, 0, 1, 1, 1]
    for step, observation, action in zip(steps, robot.observations, applied, strict=True):
        assert step.applied_action is not None and step.applied_action.dtype == np.float32
        np.testing.assert_array_equal(step.applied_action, action)
        np.testing.assert_array_equal(step.observation.state, observation.state)
