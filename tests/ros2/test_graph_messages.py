"""Messages cross between our node and an independent rmw_zenoh peer, both ways, unchanged.

Each message type the live node reads or writes goes from our publisher to zenoh-ros2-sdk's
subscription and from the sdk's publisher to our subscription; what arrives is compared with what
was sent by its CDR bytes, so every field (arrays, strings, nested messages) must be exact.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from peer import JAZZY, Peer, cdr, wait_for

from vla_client.ros2.graph import RELIABLE, SENSOR_DATA, Node

T = JAZZY.types


def header(frame: str = "base") -> Any:
    stamp = T["builtin_interfaces/msg/Time"](sec=1_765_000_000, nanosec=123_456_789)
    return T["std_msgs/msg/Header"](stamp=stamp, frame_id=frame)


def image() -> Any:
    data = np.arange(4 * 3 * 3, dtype=np.uint8)
    return T["sensor_msgs/msg/Image"](
        header=header("camera"),
        height=4,
        width=3,
        encoding="rgb8",
        is_bigendian=0,
        step=9,
        data=data,
    )


def joint_state() -> Any:
    return T["sensor_msgs/msg/JointState"](
        header=header(),
        name=["shoulder", "elbow", "wrist"],
        position=np.array([0.1, -1.25, 3.0]),
        velocity=np.array([0.0, 0.5, -0.5]),
        effort=np.array([], dtype=np.float64),
    )


def float64_array() -> Any:
    dim = T["std_msgs/msg/MultiArrayDimension"](label="joints", size=3, stride=3)
    layout = T["std_msgs/msg/MultiArrayLayout"](dim=[dim], data_offset=0)
    return T["std_msgs/msg/Float64MultiArray"](layout=layout, data=np.array([0.25, -0.5, 1e-9]))


def joint_trajectory() -> Any:
    def point(i: int) -> Any:
        return T["trajectory_msgs/msg/JointTrajectoryPoint"](
            positions=np.array([0.1 * i, 0.2 * i]),
            velocities=np.array([], dtype=np.float64),
            accelerations=np.array([], dtype=np.float64),
            effort=np.array([], dtype=np.float64),
            time_from_start=T["builtin_interfaces/msg/Duration"](sec=0, nanosec=33_333_333 * i),
        )

    return T["trajectory_msgs/msg/JointTrajectory"](
        header=header(), joint_names=["shoulder", "elbow"], points=[point(i) for i in (1, 2, 3)]
    )


def diagnostic_array() -> Any:
    value = T["diagnostic_msgs/msg/KeyValue"](key="skipped_ticks", value="2")
    status = T["diagnostic_msgs/msg/DiagnosticStatus"](
        level=1,
        name="vla_client: loop",
        message="holding: stale camera",
        hardware_id="",
        values=[value],
    )
    return T["diagnostic_msgs/msg/DiagnosticArray"](header=header(), status=[status])


MESSAGES: dict[str, Callable[[], Any]] = {
    "sensor_msgs/msg/Image": image,
    "sensor_msgs/msg/JointState": joint_state,
    "std_msgs/msg/Float64MultiArray": float64_array,
    "trajectory_msgs/msg/JointTrajectory": joint_trajectory,
    "diagnostic_msgs/msg/DiagnosticArray": diagnostic_array,
}


@pytest.mark.parametrize("msgtype", sorted(MESSAGES))
def test_our_publisher_reaches_an_independent_subscriber(
    node: Node, peer: Peer, msgtype: str
) -> None:
    sent = MESSAGES[msgtype]()
    received = peer.subscribe("/vla/out", msgtype)
    publisher = node.advertise("/vla/out", msgtype, qos=RELIABLE)

    def delivered() -> bool:
        publisher.publish(sent)
        return bool(received.snapshot())

    wait_for(delivered, f"our {msgtype} at the independent subscriber")
    assert cdr(received.snapshot()[0], msgtype) == cdr(sent, msgtype)


@pytest.mark.parametrize("msgtype", sorted(MESSAGES))
def test_an_independent_publisher_reaches_our_subscription(
    node: Node, peer: Peer, msgtype: str
) -> None:
    sent = MESSAGES[msgtype]()
    subscription = node.subscribe("/robot/in", msgtype, qos=SENSOR_DATA)
    publisher = peer.publisher("/robot/in", msgtype, qos=SENSOR_DATA.token())
    peer.publish_until(publisher, sent, subscription.latest)
    sample = subscription.latest()
    assert sample is not None
    assert cdr(sample.message, msgtype) == cdr(sent, msgtype)
    assert subscription.refused == 0 and subscription.last_refusal is None


def test_a_subscription_keeps_the_newest_depth_samples_oldest_first(node: Node, peer: Peer) -> None:
    subscription = node.subscribe("/count", "std_msgs/msg/String", qos=SENSOR_DATA)  # depth 5
    publisher = peer.publisher("/count", "std_msgs/msg/String")
    String = T["std_msgs/msg/String"]
    peer.publish_until(publisher, String(data="warm-up"), subscription.latest)
    for i in range(8):
        peer.publish(publisher, String(data=str(i)))
    wait_for(
        lambda: (latest := subscription.latest()) is not None and latest.message.data == "7",
        "the eighth message",
    )
    recent = subscription.recent()
    assert [s.message.data for s in recent] == ["3", "4", "5", "6", "7"]
    assert [s.sequence for s in recent] == sorted(s.sequence for s in recent)
    assert all(a.received_at <= b.received_at for a, b in itertools.pairwise(recent))
