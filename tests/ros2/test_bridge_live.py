"""The live node's robot side on a real graph: a Zenoh router in-process, the robot's topics and
the controller played by an independent ROS 2 peer (zenoh-ros2-sdk), and a real reference
server on 127.0.0.1. The commands are compared row by row with the chunk the server gives for
the same observation, asked for directly."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest

pytest.importorskip("zenoh")
pytest.importorskip("zenoh_ros2_sdk")

from peer import Peer, wait_for  # noqa: E402
from robot_topics import (  # noqa: E402
    COMPRESSED,
    IMAGE,
    JOINTS,
    RobotTopics,
    compressed,
    image,
    joint_state,
    statuses,
)

from vla_client import ActionClient  # noqa: E402
from vla_client.control import ChunkExecutor, Watchdog  # noqa: E402
from vla_client.observation import Observation  # noqa: E402
from vla_client.ros2.bridge import RosBridge  # noqa: E402
from vla_client.ros2.graph import Node  # noqa: E402
from vla_client.server import LocalServer, ReferencePolicy, create_app  # noqa: E402

HORIZON, JOINT_NAMES, RATE = 6, ("j1", "j2", "j3"), 30.0
FRAME = (np.arange(24 * 32 * 3, dtype=np.uint16).reshape(24, 32, 3) * 7 % 251).astype(np.uint8)
STATE = {"j3": 0.3, "j1": -0.5, "j2": 0.25}
"""The robot publishes its joints in another order than the server is sent them (j1, j2, j3)."""


def reference_server(port: int = 0) -> LocalServer:
    policy = ReferencePolicy(action_horizon=HORIZON, action_dim=len(JOINT_NAMES))
    return LocalServer(create_app(policy), port=port)


@pytest.fixture
def server() -> Iterator[LocalServer]:
    with reference_server() as running:
        yield running


def server_chunk(url: str, frames: dict[str, np.ndarray]) -> np.ndarray:
    """The chunk the server gives for the robot's observation, asked for directly."""
    state = np.array([STATE[name] for name in JOINT_NAMES])
    with ActionClient(url) as client:
        return client.infer(Observation(frames, state=state)).actions


def robot(peer: Peer, cameras: dict[str, tuple[str, Any]]) -> RobotTopics:
    state = joint_state(list(STATE), list(STATE.values()))
    return RobotTopics(peer, {**cameras, "/joint_states": (JOINTS, state)})


@contextmanager
def running_bridge(
    router: str, url: str, cameras: dict[str, str], *, command_type: str = "array",
    mode: str = "naive", max_age_s: float = 0.5, watchdog: Watchdog | None = None,
) -> Iterator[RosBridge]:  # fmt: skip
    """A bridge on its own node, its loop running in a thread until the block ends."""
    with ActionClient(url, timeout_s=2.0) as client, Node("vla_client", router=router) as node:
        executor = ChunkExecutor(
            client.infer,
            mode=mode,
            max_observation_age_s=max_age_s,
            clock=time.time,  # type: ignore[arg-type]
        )
        bridge = RosBridge(
            node, executor, images=cameras, state="/joint_states", command="/command",
            command_type=command_type, rate_hz=RATE, joints=JOINT_NAMES, max_age_s=max_age_s,
        )  # fmt: skip
        loop = bridge.control_loop(watchdog=watchdog)
        stop = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            try:
                if bridge.wait_for_input(stop.is_set, timeout_s=20.0):
                    loop.run()
            except BaseException as exc:  # handed to the test
                failure.append(exc)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        try:
            yield bridge
        finally:
            stop.set()
            bridge.stop()
            thread.join(10.0)
            executor.close(timeout=2.0)
        assert not thread.is_alive()
        assert not failure, failure


def commands(peer: Peer, command_type: str = "array") -> Any:
    msgtype = (
        "std_msgs/msg/Float64MultiArray"
        if command_type == "array"
        else ("trajectory_msgs/msg/JointTrajectory")
    )
    return peer.subscribe("/command", msgtype)


def status(peer: Peer) -> Any:
    return peer.subscribe("/diagnostics", "diagnostic_msgs/msg/DiagnosticArray")


def said(received: Any, text: str, timeout: float = 10.0) -> list[tuple[int, str, dict[str, str]]]:
    """The statuses once one whose message or values hold `text` has arrived."""
    return wait_for(
        lambda: (
            (found := statuses(received))
            and any(text in message or text in str(values) for _, message, values in found)
            and found
        ),
        f"a status saying {text!r}",
        timeout,
    )


def rows(received: Any) -> np.ndarray:
    return np.array([list(message.data) for message in received.snapshot()])


def test_array_commands_are_the_servers_chunk_row_by_row(
    zenoh_router: str, peer: Peer, server: LocalServer
) -> None:
    expected = server_chunk(server.url, {"wrist": FRAME})
    published = commands(peer)
    with (
        robot(peer, {"/wrist/image_raw": (IMAGE, image(FRAME, "bgr8"))}),
        running_bridge(zenoh_router, server.url, {"/wrist/image_raw": "wrist"}),
    ):
        published.wait(2 * HORIZON, timeout=20.0)
    got = rows(published)
    # naive, fetching when the chunk runs out: whole chunks one after the other
    np.testing.assert_allclose(got[:HORIZON], expected, rtol=0, atol=1e-6)
    np.testing.assert_allclose(got[HORIZON : 2 * HORIZON], expected, rtol=0, atol=1e-6)
