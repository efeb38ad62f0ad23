"""The node's options, refused when wrong; no router; closing from a signal handler; QoS.

Every option is checked when it is given (a ValueError naming what is valid), a router that is
not there is a ConnectError that says how to start one, and close() works from a signal handler
while Zenoh's threads are delivering samples and the main thread is reading them.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from types import FrameType

import pytest
from peer import JAZZY, Peer, wait_for

from vla_client.errors import ConnectError
from vla_client.ros2 import names
from vla_client.ros2.graph import Node, QoS

STRING = "std_msgs/msg/String"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": "9lives"}, "node name '9lives'"),
        ({"name": "has space"}, "node name 'has space'"),
        ({"name": "a/b"}, "node name 'a/b'"),
        ({"namespace": "/robot//left"}, "namespace '/robot//left'"),
        ({"namespace": "/1robot"}, "namespace '/1robot'"),
        ({"domain_id": -1}, "domain id -1: use 0-232"),
        ({"domain_id": 233}, "domain id 233: use 0-232"),
        ({"domain_id": True}, "domain id True"),
        ({"router": "localhost:7447"}, "router 'localhost:7447'"),
        ({"router": "tcp/localhost:70000"}, "router 'tcp/localhost:70000'"),
        ({"timeout_s": 0}, "timeout_s 0"),
        ({"timeout_s": float("nan")}, "timeout_s nan"),
        ({"timeout_s": "5"}, "timeout_s '5'"),
    ],
)
def test_options_are_refused_when_wrong(kwargs: dict[str, object], message: str) -> None:
    options: dict[str, object] = {"name": "ok", **kwargs}
    with pytest.raises(ValueError, match=message):
        Node(**options)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("topic", "message"),
    [
        ("/camera//image", "topic '/camera//image'"),
        ("/camera/", "topic '/camera/'"),
        ("/1camera", "topic '/1camera'"),
        ("~/private", "topic '~/private'"),
    ],
)
def test_topic_names_are_refused_when_wrong(node: Node, topic: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        node.subscribe(topic, STRING)
    with pytest.raises(ValueError, match=message):
        node.advertise(topic, STRING)


@pytest.mark.parametrize(
    ("msgtype", "message"),
    [
        ("std_msgs/String", "write it as 'package/msg/Name'"),
        ("my_msgs/msg/Thing", "not one of ROS 2 Jazzy's standard messages"),
    ],
)
def test_unknown_message_types_are_refused(node: Node, msgtype: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        node.subscribe("/topic", msgtype)


def test_qos_is_refused_when_wrong(node: Node) -> None:
    for bad, message in [
        ({"reliability": "sometimes"}, "reliability 'sometimes'"),
        ({"durability": "persistent"}, "durability 'persistent'"),
        ({"depth": 0}, "depth 0"),
        ({"depth": 2.5}, "depth 2.5"),
    ]:
        with pytest.raises(ValueError, match=message):
            QoS(**bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="qos 'best_effort'"):
        node.subscribe("/topic", STRING, qos="best_effort")  # type: ignore[arg-type]


def test_a_message_of_another_type_is_not_published(node: Node) -> None:
    publisher = node.advertise("/chatter", STRING)
    header = JAZZY.types["std_msgs/msg/Header"](
        stamp=JAZZY.types["builtin_interfaces/msg/Time"](sec=0, nanosec=0), frame_id=""
    )
    with pytest.raises(ValueError, match="/chatter carries std_msgs/msg/String; this message is"):
        publisher.publish(header)
    with pytest.raises(ValueError, match="cannot be serialised"):
        publisher.publish(JAZZY.types[STRING](data=None))


def test_no_router_is_a_connect_error_that_says_how_to_start_one() -> None:
    with socket.socket() as unused:  # a port nobody listens on
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    with pytest.raises(ConnectError, match=f"no Zenoh router answered at tcp/127.0.0.1:{port}"):
        Node("lonely", router=f"tcp/127.0.0.1:{port}", timeout_s=0.5)


def test_close_from_a_signal_handler_while_samples_arrive(zenoh_router: str, peer: Peer) -> None:
    node = Node("interrupted", router=zenoh_router)
    subscription = node.subscribe("/flood", STRING)
    publisher = peer.publisher("/flood", STRING)
    peer.publish_until(publisher, JAZZY.types[STRING](data="x"), subscription.latest)
    flooding = threading.Event()
    flooding.set()

    def flood() -> None:
        while flooding.is_set():
            peer.publish(publisher, JAZZY.types[STRING](data="x" * 1000))

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        node.close()  # as the CLI does on SIGINT / SIGTERM

    sender = threading.Thread(target=flood, daemon=True)
    previous = signal.signal(signal.SIGUSR1, on_signal)
    try:
        sender.start()
        deadline = time.monotonic() + 5
        os.kill(os.getpid(), signal.SIGUSR1)  # delivered while the loop below reads
        while not node.closed and time.monotonic() < deadline:
            subscription.latest()
            subscription.recent()
        assert node.closed
    finally:
        flooding.clear()
        sender.join(5)
        signal.signal(signal.SIGUSR1, previous)
    wait_for(lambda: ("/", "interrupted") not in peer.nodes(), "the node gone from the graph")


def test_transient_local_keeps_the_last_samples_for_a_late_subscription(
    zenoh_router: str,
) -> None:
    latched = QoS("reliable", "transient_local", depth=2)
    with (
        Node("latcher", router=zenoh_router) as early,
        Node("late", router=zenoh_router) as late,
    ):
        publisher = early.advertise("/robot_description", STRING, qos=latched)
        for text in ("a", "b", "c"):
            publisher.publish(JAZZY.types[STRING](data=text))
        subscription = late.subscribe("/robot_description", STRING, qos=latched)
        wait_for(lambda: len(subscription.recent()) == 2, "the two cached samples")
        assert [s.message.data for s in subscription.recent()] == ["b", "c"]


def test_names_are_mangled_as_rmw_zenoh_does() -> None:
    assert names.mangle("/") == "%"
    assert names.mangle("") == "%"
    assert names.mangle("/robot/left") == "%robot%left"
    assert names.namespace("") == names.namespace("/") == "/"
    assert names.namespace("robot/left/") == "/robot/left"
    assert names.topic_name("status", "/robot") == "/robot/status"
    assert names.topic_name("status", "/") == "/status"
    assert names.dds_type_name("sensor_msgs/msg/Image") == "sensor_msgs::msg::dds_::Image_"
    assert names.type_hash("sensor_msgs/msg/Image") == (
        "RIHS01_d31d41a9a4c4bc8eae9be757b0beed306564f7526c88ea6a4588fb9582527d47"
    )
    assert names.data_keyexpr(3, "/camera/image_raw", "sensor_msgs/msg/Image").startswith(
        "3/camera/image_raw/sensor_msgs::msg::dds_::Image_/RIHS01_d31d41a9"
    )
