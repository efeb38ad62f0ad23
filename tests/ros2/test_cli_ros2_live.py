"""``vla-client ros2`` as a process on a live graph: it commands, and SIGINT or SIGTERM stops it
with exit 0, nothing published after, and the node gone from the graph (its liveliness tokens
undeclared), as the independent peer sees it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("zenoh")
pytest.importorskip("zenoh_ros2_sdk")

from peer import Peer, wait_for
from robot_topics import IMAGE, JOINTS, RobotTopics, image, joint_state, statuses

import vla_client
from vla_client.server import LocalServer, ReferencePolicy, create_app

FRAME = np.full((24, 32, 3), 90, dtype=np.uint8)
NODE = ("/", "vla_client")


@pytest.fixture
def server() -> Iterator[LocalServer]:
    with LocalServer(create_app(ReferencePolicy(action_horizon=6, action_dim=2))) as running:
        yield running


def start(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(Path(vla_client.__file__).parents[1])}
    return subprocess.Popen(
        [sys.executable, "-m", "vla_client.cli", "ros2", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_it_and_the_node_leaves_the_graph(
    signum: int, zenoh_router: str, peer: Peer, server: LocalServer
) -> None:
    published = peer.subscribe("/arm/command", "std_msgs/msg/Float64MultiArray")
    topics = {
        "/cam/image_raw": (IMAGE, image(FRAME)),
        "/joint_states": (JOINTS, joint_state(["a", "b"], [0.1, 0.2])),
    }
    with RobotTopics(peer, topics):
        process = start(
            "--url", server.url, "--image", "/cam/image_raw=wrist", "--state", "/joint_states",
            "--command", "/arm/command", "--command-type", "array", "--router", zenoh_router,
        )  # fmt: skip
        try:
            published.wait(5, timeout=60.0)
            wait_for(lambda: NODE in peer.nodes(), "the node on the graph")
            process.send_signal(signum)
            out, err = process.communicate(timeout=30)
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()
        count = len(published.snapshot())
        wait_for(lambda: NODE not in peer.nodes(), "the node gone from the graph")
        assert len(published.snapshot()) == count  # nothing after it stopped
    assert process.returncode == 0, err
    assert "stopped; the node has left the graph" in out
    assert "Traceback" not in err


def run_until_it_stops(
    peer: Peer, router: str, url: str, *options: str
) -> tuple[int, str, list[tuple[int, str, dict[str, str]]]]:
    """Run the command against the robot's topics until it ends by itself: its exit status,
    its stderr and the ``stopped`` statuses it published."""
    said = peer.subscribe("/diagnostics", "diagnostic_msgs/msg/DiagnosticArray")
    topics = {
        "/cam/image_raw": (IMAGE, image(FRAME)),
        "/joint_states": (JOINTS, joint_state(["a", "b"], [0.1, 0.2])),
    }
    with RobotTopics(peer, topics):
        process = start(
            "--url", url, "--image", "/cam/image_raw=wrist", "--state", "/joint_states",
            "--command", "/arm/command", "--command-type", "array", "--router", router, *options,
        )  # fmt: skip
        try:
            _, err = process.communicate(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()
        stopped = wait_for(
            lambda: [s for s in statuses(said) if s[1].startswith("stopped: ")], "a stopped status"
        )
    return process.returncode, err, stopped


def test_a_gate_that_rejects_stops_it_and_says_so(
    zenoh_router: str, peer: Peer, server: LocalServer
) -> None:
    published = peer.subscribe("/arm/command", "std_msgs/msg/Float64MultiArray")
    code, err, stopped = run_until_it_stops(
        peer, zenoh_router, server.url,
        "--low=-1e-6", "--high", "1e-6",  # the reference policy's actions are larger
    )  # fmt: skip
    assert code == 1
    *logged, last = err.splitlines()  # the log says each change of state; then the error line
    assert last.startswith("vla-client: error: outside bounds at dim 0"), err
    assert any("WARNING vla_client.ros2.bridge: stopped: outside bounds" in line for line in logged)
    assert stopped[0][0] == 2  # ERROR
    assert published.snapshot() == []  # the rejected action was never commanded
    assert NODE not in peer.nodes()


def test_a_server_that_refuses_the_observation_stops_it_and_says_so(
    zenoh_router: str, peer: Peer
) -> None:
    policy = ReferencePolicy(action_horizon=6, action_dim=2, state_dim=5)  # the robot sends 2
    with LocalServer(create_app(policy)) as server:
        code, err, stopped = run_until_it_stops(
            peer,
            zenoh_router,
            server.url,
            "--no-check",  # sent as it is: the server says 422
            "--max-refusals",
            "2",
        )
    assert code == 1
    last = err.splitlines()[-1]
    assert last.startswith("vla-client: error: ") and "state" in last, err
    assert "refused 2 requests in a row" in last, err  # held through the first, asked again
    assert stopped[0][0] == 2 and "state" in stopped[0][1]
    assert NODE not in peer.nodes()
