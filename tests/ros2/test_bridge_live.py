"""The live node's robot side on a real graph: a Zenoh router in-process, the robot's topics and
the controller played by an independent ROS 2 peer (zenoh-ros2-sdk), and a real reference
server on 127.0.0.1. The commands are compared row by row with the chunk the server gives for
the same observation, asked for directly."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import cv2
import numpy as np
import pytest

pytest.importorskip("zenoh")
pytest.importorskip("zenoh_ros2_sdk")

from peer import Peer, wait_for
from robot_topics import (
    COMPRESSED,
    IMAGE,
    JOINTS,
    RobotTopics,
    compressed,
    image,
    joint_state,
    statuses,
)

from vla_client import ActionClient
from vla_client.control import ChunkExecutor, SafetyGate, Watchdog
from vla_client.observation import Observation
from vla_client.ros2.bridge import RosBridge
from vla_client.ros2.graph import Node
from vla_client.server import LocalServer, ReferencePolicy, create_app
from vla_client.server.policies.reach_flow import ReachFlowPolicy
from vla_client.tasks.reach import ReachTask

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
def idle_bridge(router: str, url: str, cameras: dict[str, str]) -> Iterator[RosBridge]:
    """A bridge on its own node whose loop does not run: the test reads it."""
    with ActionClient(url) as client, Node("vla_client", router=router) as node:
        executor = ChunkExecutor(client.infer, clock=time.time)
        yield RosBridge(
            node, executor, images=cameras, state="/joint_states", command="/command",
            command_type="array", rate_hz=RATE, joints=JOINT_NAMES,
        )  # fmt: skip


@contextmanager
def running_bridge(
    router: str, url: str, cameras: dict[str, str], *, command_type: str = "array",
    mode: str = "naive", max_age_s: float = 0.5, watchdog: Watchdog | None = None,
    joints: tuple[str, ...] = JOINT_NAMES, point_gate: Any = None,
) -> Iterator[RosBridge]:  # fmt: skip
    """A bridge on its own node, its loop running in a thread until the block ends."""
    with ActionClient(url, timeout_s=2.0) as client, Node("vla_client", router=router) as node:
        executor = ChunkExecutor(
            client.infer,
            mode=mode,  # type: ignore[arg-type]
            max_observation_age_s=max_age_s,
            clock=time.time,
            server=client.metadata() if mode == "rtc" else None,
        )
        bridge = RosBridge(
            node, executor, images=cameras, state="/joint_states", command="/command",
            command_type=command_type, rate_hz=RATE, joints=joints, max_age_s=max_age_s,
            point_gate=point_gate,
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
    cameras = {"/wrist/image_raw": (IMAGE, image(FRAME, "bgr8"))}
    with (
        robot(peer, cameras),
        running_bridge(zenoh_router, server.url, {"/wrist/image_raw": "wrist"}),
    ):
        published.wait(3 * HORIZON, timeout=20.0)
    got = rows(published)
    # naive, fetching when the chunk runs out: whole chunks one after the other. The state was
    # sent as j1, j2, j3 (the robot publishes j3, j1, j2): another order gives another chunk.
    # The first commands may go before the peer's subscription is matched: start at a chunk's
    # first row.
    start = next(i for i, row in enumerate(got) if np.allclose(row, expected[0], atol=1e-6))
    assert start < HORIZON, got
    np.testing.assert_allclose(
        got[start : start + 2 * HORIZON], np.vstack([expected] * 2), atol=1e-6
    )


def test_a_trajectory_is_the_chunk_for_the_states_joints_a_period_apart(
    zenoh_router: str, peer: Peer, server: LocalServer
) -> None:
    expected = server_chunk(server.url, {"wrist": FRAME})
    published = commands(peer, "trajectory")
    cameras = {"/wrist/image_raw/compressed": (COMPRESSED, compressed(FRAME, "png"))}
    with robot(peer, cameras), running_bridge(
        zenoh_router, server.url, {"/wrist/image_raw/compressed": "wrist"},
        command_type="trajectory",
    ):  # fmt: skip
        first, second = published.wait(2, timeout=20.0)[:2]
    for trajectory in (first, second):  # one a chunk, from its first row (naive)
        assert list(trajectory.joint_names) == list(JOINT_NAMES)
        points = np.array([list(point.positions) for point in trajectory.points])
        np.testing.assert_allclose(points, expected, rtol=0, atol=1e-6)
        starts = [
            p.time_from_start.sec + p.time_from_start.nanosec * 1e-9 for p in trajectory.points
        ]
        np.testing.assert_allclose(starts, np.arange(1, HORIZON + 1) / RATE, atol=1e-9)
        assert (trajectory.header.stamp.sec, trajectory.header.stamp.nanosec) == (0, 0)


def test_real_time_chunking_against_a_server_that_does_it(zenoh_router: str, peer: Peer) -> None:
    published = commands(peer)
    world = ReachTask()  # the reach task's own cameras: what the policy can see
    world.reset(0)
    frames = world.frames()
    cameras = {
        "/top/image_raw": (IMAGE, image(frames["top"])),
        "/wrist/image_raw/compressed": (COMPRESSED, compressed(frames["wrist"])),
    }
    state = {"/joint_states": (JOINTS, joint_state(["j1"], [0.0]))}
    names = {"/top/image_raw": "top", "/wrist/image_raw/compressed": "wrist"}
    with (
        LocalServer(create_app(ReachFlowPolicy())) as server,
        RobotTopics(peer, {**cameras, **state}),
        running_bridge(zenoh_router, server.url, names, mode="rtc", joints=("j1",)) as bridge,
    ):
        published.wait(3 * HORIZON, timeout=30.0)
        stats = bridge.executor.stats
    # each reply echoed the prefix and delay it was sent (else ModeNotSupportedError ended it)
    assert stats.chunks_received >= 2 and stats.errors == 0
    assert all(len(message.data) == 2 for message in published.snapshot())


def test_a_trajectorys_points_pass_a_gate_of_their_own_a_period_apart(
    zenoh_router: str, peer: Peer, server: LocalServer
) -> None:
    expected = server_chunk(server.url, {"wrist": FRAME}).astype(np.float64)
    step = 0.5 * np.abs(np.diff(expected, axis=0)).max()  # half the chunk's largest step
    published = commands(peer, "trajectory")
    with robot(peer, {"/wrist/image_raw": (IMAGE, image(FRAME))}), running_bridge(
        zenoh_router, server.url, {"/wrist/image_raw": "wrist"}, command_type="trajectory",
        point_gate=lambda clock: SafetyGate(max_delta=step, on_delta="clip", clock=clock),
    ):  # fmt: skip
        [trajectory] = published.wait(1, timeout=20.0)[:1]
    points = np.array([list(point.positions) for point in trajectory.points])
    np.testing.assert_allclose(points[0], expected[0], atol=1e-6)  # the loop's own gate: none
    assert np.abs(np.diff(points, axis=0)).max() <= step + 1e-6
    assert not np.allclose(points, expected, atol=1e-6)  # steps were clipped


def test_every_image_encoding_and_compressed_images_are_read(
    zenoh_router: str, peer: Peer, server: LocalServer
) -> None:
    gray = cv2.cvtColor(cv2.cvtColor(FRAME, cv2.COLOR_RGB2GRAY), cv2.COLOR_GRAY2RGB)
    cameras = {
        f"/{encoding}/image_raw": (IMAGE, image(FRAME, encoding, pad=3))
        for encoding in ("rgb8", "bgr8", "mono8", "rgba8", "bgra8")
    }
    cameras["/png/image_raw/compressed"] = (COMPRESSED, compressed(FRAME, "png"))
    cameras["/jpeg/image_raw/compressed"] = (COMPRESSED, compressed(FRAME, "jpeg"))
    names = {topic: topic.split("/")[1] for topic in cameras}
    with robot(peer, cameras), idle_bridge(zenoh_router, server.url, names) as bridge:
        assert bridge.wait_for_input(lambda: False, timeout_s=20.0)
        frames = bridge.observe().images
    assert set(frames) == set(names.values())
    for name in ("rgb8", "bgr8", "rgba8", "bgra8", "png"):
        np.testing.assert_array_equal(frames[name], FRAME, err_msg=name)
    np.testing.assert_array_equal(frames["mono8"], gray)
    assert np.abs(frames["jpeg"].astype(int) - FRAME).mean() < 12  # lossy


@contextmanager
def commanding(router: str, peer: Peer, url: str) -> Iterator[tuple[RobotTopics, Any, Any]]:
    """The robot's topics, and a bridge commanding from them with a watchdog that would repeat
    the last action (so only the bridge's holding stops the commands); yields the topics, the
    commands and the statuses the peer receives, once commands flow."""
    published, said_on = commands(peer), status(peer)
    cameras = {"/wrist/image_raw": (IMAGE, image(FRAME))}
    with robot(peer, cameras) as topics, running_bridge(
        router, url, {"/wrist/image_raw": "wrist"}, mode="aligned", max_age_s=0.3,
        watchdog=Watchdog(0.5, "hold"),
    ):  # fmt: skip
        published.wait(5, timeout=20.0)
        yield topics, published, said_on


def test_stale_input_publishes_nothing_until_it_is_fresh_again(
    zenoh_router: str, peer: Peer, server: LocalServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="vla_client.ros2.bridge")
    with commanding(zenoh_router, peer, server.url) as (topics, published, said_on):
        topics.pause()
        said(said_on, "input stale")
        heard = len(statuses(said_on))
        assert no_more(published)
        assert len(statuses(said_on)) > heard  # said again at least once a second
        logged = [r for r in caplog.records if "holding: input stale" in r.getMessage()]
        assert len(logged) == 1 and logged[0].levelno == logging.WARNING  # said once
        levels = {level for level, message, _ in statuses(said_on) if "input stale" in message}
        assert levels == {1}  # WARN
        topics.resume()
        before = len(published.snapshot())
        published.wait(before + 5, timeout=20.0)
        said(said_on, "running")


def test_a_server_killed_and_restarted(zenoh_router: str, peer: Peer) -> None:
    published, said_on = commands(peer), status(peer)
    first = reference_server()
    first.__enter__()
    url, port = first.url, first.port
    cameras = {"/wrist/image_raw": (IMAGE, image(FRAME))}
    try:
        with robot(peer, cameras), running_bridge(
            zenoh_router, url, {"/wrist/image_raw": "wrist"}
        ):  # fmt: skip
            published.wait(5, timeout=20.0)
            first.__exit__(None, None, None)
            said(said_on, "no chunk from the server")
            assert no_more(published)
            with reference_server(port):
                before = len(published.snapshot())
                published.wait(before + 5, timeout=20.0)
                said(said_on, "running")
    finally:
        first.__exit__(None, None, None)


HOSTILE = {
    "an encoding not read": ("/wrist/image_raw", "encoding 'yuv422'"),
    "data shorter than height x step": ("/wrist/image_raw", "holds"),
    "a NaN joint position": ("/joint_states", "NaN"),
    "another type on the topic": ("/wrist/image_raw", "CompressedImage"),
}


@pytest.mark.parametrize("hostile", list(HOSTILE))
def test_hostile_input_is_refused_on_the_status_topic_and_never_commanded(
    hostile: str, zenoh_router: str, peer: Peer, server: LocalServer
) -> None:
    with commanding(zenoh_router, peer, server.url) as (topics, published, said_on):
        topic, text = HOSTILE[hostile]
        if hostile == "an encoding not read":
            topics.replace(topic, yuv_image(FRAME))
        elif hostile == "data shorter than height x step":
            topics.replace(topic, image(FRAME, cut=7))
        elif hostile == "a NaN joint position":
            topics.replace(topic, joint_state(list(STATE), [0.1, float("nan"), 0.2]))
        else:
            topics.replace(topic, compressed(FRAME), msgtype=COMPRESSED)
        found = said(said_on, text)
        said(said_on, "input stale")
        assert no_more(published)
    refusals = [values for _, _, values in found if text in values.get("last_refusal", "")]
    assert refusals and topic in refusals[0]["last_refusal"]
    assert int(refusals[0]["refused_inputs"]) >= 1


def points_of(trajectory: Any) -> list[Any]:
    return list(trajectory.points)


def yuv_image(rgb: np.ndarray) -> Any:
    build = image(rgb)

    def hostile(stamp: float) -> Any:
        message = build(stamp)
        message.encoding = "yuv422"
        return message

    return hostile


def no_more(received: Any, settle_s: float = 0.3, watch_s: float = 1.0) -> bool:
    """Whether nothing more arrives for `watch_s` once what was in flight has landed."""
    time.sleep(settle_s)
    count = len(received.snapshot())
    time.sleep(watch_s)
    return len(received.snapshot()) == count


def test_input_stamped_ahead_of_this_hosts_clock_is_never_commanded(
    zenoh_router: str, peer: Peer, server: LocalServer
) -> None:
    published, said_on = commands(peer), status(peer)
    ahead = 2.0  # the robot's clock is two seconds ahead of this host's
    frame, state = image(FRAME), joint_state(list(STATE), list(STATE.values()))
    topics = {
        "/wrist/image_raw": (IMAGE, lambda stamp: frame(stamp + ahead)),
        "/joint_states": (JOINTS, lambda stamp: state(stamp + ahead)),
    }
    with RobotTopics(peer, topics), running_bridge(
        zenoh_router, server.url, {"/wrist/image_raw": "wrist"}, mode="aligned",
        watchdog=Watchdog(0.5, "hold"),
    ):  # fmt: skip
        said(said_on, "ahead of this host's clock, over --max-age-ms 500: synchronise")
        assert no_more(published)
    assert published.snapshot() == []
