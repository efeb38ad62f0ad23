"""docs/ros2.md's bridge sections, checked: the two documented commands run as written (the
server's URL and the router replaced by the test's) against a robot's topics and stop on
SIGINT; the controllers' YAML names the joints and topics the commands do; the Python example
runs."""

from __future__ import annotations

import re
import shlex
import signal
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import yaml

pytest.importorskip("zenoh")
pytest.importorskip("zenoh_ros2_sdk")

from peer import Peer
from robot_topics import COMPRESSED, IMAGE, JOINTS, RobotTopics, compressed, image, joint_state
from test_cli_ros2_live import start

from vla_client.server import LocalServer, ReferencePolicy, create_app

PAGE = Path(__file__).resolve().parents[2] / "docs" / "ros2.md"
DOCS_URL = "http://gpu-box:8000"
FRAME = np.full((24, 32, 3), 120, dtype=np.uint8)


def documented_commands() -> list[list[str]]:
    marked = r"<!-- run as written: tests/ros2/test_bridge_docs.py -->\n```console\n\$ (.*?)```"
    blocks = re.findall(marked, PAGE.read_text(encoding="utf-8"), re.S)
    return [shlex.split(block.replace("\\\n", " ")) for block in blocks]


def option(words: list[str], name: str) -> list[str]:
    return [words[i + 1] for i, word in enumerate(words) if word == name]


@pytest.fixture
def server() -> Iterator[LocalServer]:
    with LocalServer(create_app(ReferencePolicy(action_horizon=8, action_dim=7))) as running:
        yield running


def robot(peer: Peer, words: list[str]) -> RobotTopics:
    joints = option(words, "--joints")[0].split(",")
    topics = {}
    for pair in option(words, "--image"):
        topic = pair.split("=")[0]
        kind = COMPRESSED if topic.endswith("/compressed") else IMAGE
        build = compressed(FRAME, "jpeg") if kind == COMPRESSED else image(FRAME, "bgr8")
        topics[topic] = (kind, build)
    state = joint_state(list(reversed(joints)), np.linspace(-0.5, 0.5, len(joints)))
    topics[option(words, "--state")[0]] = (JOINTS, state)
    return RobotTopics(peer, topics)


@pytest.mark.parametrize("index", [0, 1], ids=["array", "trajectory"])
def test_the_documented_command_runs_as_written(
    index: int, zenoh_router: str, peer: Peer, server: LocalServer
) -> None:
    words = documented_commands()[index]
    assert words[:2] == ["vla-client", "ros2"] and DOCS_URL in words
    assert "--router" not in words  # rmw_zenohd's default; the test's router is added
    kind = option(words, "--command-type")[0]
    msgtype = {"array": "std_msgs/msg/Float64MultiArray", "trajectory": (
        "trajectory_msgs/msg/JointTrajectory"
    )}[kind]  # fmt: skip
    published = peer.subscribe(option(words, "--command")[0], msgtype)
    args = [server.url if word == DOCS_URL else word for word in words[2:]]
    with robot(peer, words):
        process = start(*args, "--router", zenoh_router)
        try:
            [first] = published.wait(1, timeout=60.0)[:1]
            process.send_signal(signal.SIGINT)
            _, err = process.communicate(timeout=30)
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()
    assert process.returncode == 0, err
    if kind == "array":
        assert len(first.data) == 7
    else:
        assert list(first.joint_names) == option(words, "--joints")[0].split(",")


def test_the_controllers_yaml_names_the_commands_joints_and_topics() -> None:
    text = PAGE.read_text(encoding="utf-8")
    [block] = re.findall(r"```yaml\n(.*?)```", text, re.S)
    config = yaml.safe_load(block)
    for words in documented_commands():
        joints = option(words, "--joints")[0].split(",")
        topic = option(words, "--command")[0]
        controller, suffix = topic.strip("/").split("/")
        kind = option(words, "--command-type")[0]
        assert suffix == {"array": "commands", "trajectory": "joint_trajectory"}[kind]
        assert controller in config["controller_manager"]["ros__parameters"]
        assert config[controller]["ros__parameters"]["joints"] == joints


def test_the_python_example_runs(zenoh_router: str, peer: Peer, server: LocalServer) -> None:
    section = PAGE.read_text(encoding="utf-8").split("## In Python", 1)[1].split("\n## ", 1)[0]
    [code] = re.findall(r"```python\n(.*?)```", section, re.S)
    assert DOCS_URL in code and "tcp/localhost:7447" in code and "ticks=300" in code
    code = code.replace(DOCS_URL, server.url).replace("tcp/localhost:7447", zenoh_router)
    code = code.replace("ticks=300", "ticks=30")  # a second, not ten
    published = peer.subscribe(
        "/forward_position_controller/commands", "std_msgs/msg/Float64MultiArray"
    )
    topics = {
        "/wrist/image_raw": (IMAGE, image(FRAME)),
        "/joint_states": (JOINTS, joint_state([f"joint{i}" for i in range(1, 8)], np.zeros(7))),
    }
    with RobotTopics(peer, topics):
        exec(code, {})
    assert published.wait(1, timeout=10.0)
