"""`LeRobotRobot` drives a real LeRobot `Robot` subclass (the simulated arm) from a real
`ControlLoop` whose chunks come from a real server on 127.0.0.1."""

from __future__ import annotations

import numpy as np
import pytest
from sim_arm import CAMERAS, HORIZON, JOINTS, SimArm, draw

from oracles import oracle_actions
from vla_client import ActionClient
from vla_client.control import ChunkExecutor, ControlLoop
from vla_client.errors import InvalidObservationError
from vla_client.lerobot import LeRobotRobot
from vla_client.observation import Observation

NAMES = [f"{joint}.pos" for joint in JOINTS]


def test_the_features_give_the_names_and_cameras_in_the_robots_order(arm: SimArm) -> None:
    from lerobot.datasets.utils import hw_to_dataset_features

    adapter = LeRobotRobot(arm)
    assert adapter.state_names == adapter.action_names == NAMES
    assert adapter.camera_shapes == CAMERAS
    # The state is what LeRobot's own datasets call observation.state, in the same order.
    features = hw_to_dataset_features(arm.observation_features, "observation")
    assert features["observation.state"]["names"] == adapter.state_names
    assert adapter.recording_metadata() == {
        "robot_type": "vla_sim_arm", "state_names": NAMES, "action_names": NAMES,
    }  # fmt: skip


def test_observe_reads_the_joints_in_order_and_the_frames_as_drawn(arm: SimArm) -> None:
    arm.positions.update(shoulder_pan=0.25, shoulder_lift=-0.5, elbow_flex=0.75, gripper=0.1)
    times = iter([10.0, 11.0])
    adapter = LeRobotRobot(arm, cameras=["wrist"], task="wave", clock=lambda: next(times))
    observation = adapter.observe()
    assert observation.state is not None and observation.state.dtype == np.float32
    np.testing.assert_array_equal(observation.state, np.float32([0.25, -0.5, 0.75, 0.1]))
    assert list(observation.images) == ["wrist"]
    np.testing.assert_array_equal(
        observation.images["wrist"], draw(CAMERAS["wrist"], [0.25, -0.5, 0.75, 0.1])
    )
    assert observation.task == "wave"
    assert observation.capture_times == {"wrist": 10.0}
    adapter.task = "rest"
    assert adapter.observe().task == "rest"
    reordered = LeRobotRobot(arm, cameras=["wrist", "front"]).observe()
    assert list(reordered.images) == ["wrist", "front"]


def test_apply_action_sends_each_value_to_its_joint(arm: SimArm) -> None:
    adapter = LeRobotRobot(arm)
    adapter.apply_action(np.float32([0.5, -0.25, 1.0, 0.0]))
    assert arm.sent == [dict(zip(NAMES, [0.5, -0.25, 1.0, 0.0], strict=True))]
    assert arm.positions == {"shoulder_pan": 0.25, "shoulder_lift": -0.125,
                             "elbow_flex": 0.5, "gripper": 0.0}  # fmt: skip


@pytest.mark.parametrize(
    ("action", "message"),
    [
        (np.zeros(3, np.float32), r"has 3 values; the robot takes 4: shoulder_pan\.pos"),
        (np.zeros(5, np.float32), r"has 5 values; the robot takes 4"),
        (np.zeros(1, np.float32), r"has 1 values; the robot takes 4"),
        (np.zeros((2, 4), np.float32), r"1-D numeric vector; got float32 of shape \[2, 4\]"),
        (np.float32([0, np.nan, 0, 0]), "NaN or infinity"),
        (np.float32([0, 0, np.inf, 0]), "NaN or infinity"),
        (np.array(["a", "b", "c", "d"]), "1-D numeric vector"),
    ],
)
def test_an_action_that_does_not_fit_is_refused_and_nothing_is_sent(
    arm: SimArm, action: np.ndarray, message: str
) -> None:
    adapter = LeRobotRobot(arm)
    with pytest.raises(ValueError, match=message):
        adapter.apply_action(action)
    assert arm.sent == []
    assert set(arm.positions.values()) == {0.0}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"cameras": ["top"]}, r"distinct cameras of the robot \(front, wrist\)"),
        ({"cameras": []}, "at least one"),
        ({"cameras": ["front", "front"]}, "distinct cameras"),
        ({"cameras": "front"}, "a list of camera names, not the string"),
        ({"task": 3}, "task must be a string"),
        ({"clock": 1.0}, "clock must be a callable"),
    ],
)
def test_options_are_checked(arm: SimArm, options: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LeRobotRobot(arm, **options)  # type: ignore[arg-type]


def test_features_that_cannot_be_an_observation_are_refused(arm: SimArm) -> None:
    arm.camera_shapes = {"depth": (48, 64, 1)}
    with pytest.raises(ValueError, match=r"'depth' is \(48, 64, 1\): only float values"):
        LeRobotRobot(arm)
    arm.camera_shapes = {}
    with pytest.raises(ValueError, match="no camera features"):
        LeRobotRobot(arm)
    with pytest.raises(
        ValueError, match=r"must be a LeRobot Robot .* object has no observation_features"
    ):
        LeRobotRobot(object())


def test_a_reading_that_breaks_the_features_is_an_invalid_observation(arm: SimArm) -> None:
    adapter = LeRobotRobot(arm)
    arm.camera_shapes = {"front": (48, 64, 3)}  # the robot stops giving the wrist camera
    with pytest.raises(InvalidObservationError, match="has no wrist"):
        adapter.observe()
    arm.camera_shapes = {"front": (90, 160, 3), "wrist": (96, 128, 3)}
    with pytest.raises(InvalidObservationError, match=r"'front' gave a frame of shape \[90"):
        adapter.observe()
    arm.camera_shapes = dict(CAMERAS)
    arm.positions["gripper"] = float("nan")
    with pytest.raises(InvalidObservationError, match="NaN"):
        adapter.observe()


def test_a_control_loop_drives_the_arm_with_the_servers_actions(
    arm: SimArm, server_url: str
) -> None:
    """Every tick's action reaches the arm as a dict in its action features' order, the
    observations the loop records are the arm's readings, and each applied action is a row of
    the chunk the reference policy computes (an oracle written apart) for an earlier one. A
    recording loop reads the arm once a tick, also on the ticks the executor sends."""
    adapter = LeRobotRobot(arm, task="reach")
    ticks: list[tuple[int, Observation, np.ndarray]] = []
    with ActionClient(server_url, encoding="png", wire="msgpack") as client:
        executor = ChunkExecutor(client.infer, prefetch_at=HORIZON // 2)
        loop = ControlLoop(
            observe=adapter.observe, executor=executor, apply_action=adapter.apply_action,
            rate_hz=20.0, record=lambda o, a: ticks.append((loop.stats.ticks - 1, o, a.copy())),
        )  # fmt: skip
        try:
            stats = loop.run(ticks=40)
        finally:
            executor.close(timeout=5.0)
    assert stats.applied == len(ticks) == len(arm.sent) >= 20
    assert len(arm.readings) == stats.ticks

    def chunk_for(reading: dict[str, object]) -> np.ndarray:
        """The oracle's chunk for what the arm reported on a tick (recorded or not)."""
        seen = Observation({c: reading[c] for c in CAMERAS},
                           state=np.float32([reading[n] for n in NAMES]), task="reach")  # fmt: skip
        return oracle_actions(seen, horizon=HORIZON, action_dim=len(JOINTS))

    chunks = [chunk_for(reading) for reading in arm.readings]
    for (tick, observation, action), sent in zip(ticks, arm.sent, strict=True):
        assert sent == dict(zip(NAMES, action.tolist(), strict=True))
        reading = arm.readings[tick]
        assert observation.state is not None
        np.testing.assert_array_equal(observation.state, np.float32([reading[n] for n in NAMES]))
        for camera in CAMERAS:
            np.testing.assert_array_equal(observation.images[camera], reading[camera])
        rows = np.concatenate(chunks[: tick + 1])
        assert np.abs(rows - action).max(axis=1).min() < 1e-5, "an action from no chunk"
    # The arm moved: its last reading is where the actions took it, not where it started.
    assert max(abs(p) for p in arm.positions.values()) > 0.05
