"""docs/ros2.md's graph snippet runs as written against a router, with a robot's JointState."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import numpy as np
from peer import JAZZY, Peer, wait_for

PAGE = Path(__file__).resolve().parents[2] / "docs" / "ros2.md"


def graph_snippet() -> str:
    section = PAGE.read_text(encoding="utf-8").split("## How it joins the graph", 1)[1]
    [code] = re.findall(r"```python\n(.*?)```", section.split("\n## ", 1)[0], re.S)
    return code


def test_the_snippet_commands_the_positions_it_reads(zenoh_router: str, peer: Peer) -> None:
    code = graph_snippet()
    assert 'router="tcp/localhost:7447"' in code  # rmw_zenohd's endpoint, here the test's
    commands = peer.subscribe(
        "/forward_position_controller/commands", "std_msgs/msg/Float64MultiArray"
    )
    state = JAZZY.types["sensor_msgs/msg/JointState"](
        header=JAZZY.types["std_msgs/msg/Header"](
            stamp=JAZZY.types["builtin_interfaces/msg/Time"](sec=1, nanosec=0), frame_id=""
        ),
        name=["j1", "j2"],
        position=np.array([0.5, -0.25]),
        velocity=np.array([], dtype=np.float64),
        effort=np.array([], dtype=np.float64),
    )
    robot = peer.publisher("/joint_states", "sensor_msgs/msg/JointState")
    done = threading.Event()

    def publish_states() -> None:  # the robot's joint_state_broadcaster, at 50 Hz
        while not done.wait(0.02):
            peer.publish(robot, state)

    broadcaster = threading.Thread(target=publish_states, daemon=True)
    broadcaster.start()
    try:
        exec(code.replace("tcp/localhost:7447", zenoh_router), {})
    finally:
        done.set()
        broadcaster.join(5)
    [command] = commands.wait(1)
    assert list(command.data) == [0.5, -0.25]
    wait_for(lambda: ("/", "vla_policy") not in peer.nodes(), "the snippet's node gone")
