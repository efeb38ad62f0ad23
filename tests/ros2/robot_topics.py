"""A robot's topics for the bridge tests, published by the independent peer (`peer.Peer`).

`RobotTopics` publishes, from a thread of its own at about 30 Hz, what a ROS 2 robot publishes:
camera images (any `sensor_msgs/Image` encoding or a CompressedImage) and a JointState, every
message stamped with the wall clock when it is sent (ROS time, as a driver stamps it). A test
can pause it (the robot's topics go quiet), swap a topic's message for a hostile one, and read
what the node published back: its commands and its status, through the peer's subscriptions.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import cv2
import numpy as np
from peer import JAZZY, Peer, Received

IMAGE = "sensor_msgs/msg/Image"
COMPRESSED = "sensor_msgs/msg/CompressedImage"
JOINTS = "sensor_msgs/msg/JointState"
CHANNELS = {"rgb8": 3, "bgr8": 3, "mono8": 1, "rgba8": 4, "bgra8": 4}
PERIOD_S = 1 / 30

Build = Callable[[float], Any]
"""A message for a stamp (seconds of ROS time)."""


def header(stamp: float) -> Any:
    sec = int(stamp)
    time_ = JAZZY.types["builtin_interfaces/msg/Time"](sec=sec, nanosec=int((stamp - sec) * 1e9))
    return JAZZY.types["std_msgs/msg/Header"](stamp=time_, frame_id="camera")


def as_encoding(rgb: np.ndarray, encoding: str) -> np.ndarray:
    """An RGB frame in `encoding`'s channel layout (what a driver of that encoding sends)."""
    convert = {
        "rgb8": None,
        "bgr8": cv2.COLOR_RGB2BGR,
        "mono8": cv2.COLOR_RGB2GRAY,
        "rgba8": cv2.COLOR_RGB2RGBA,
        "bgra8": cv2.COLOR_RGB2BGRA,
    }[encoding]
    return rgb if convert is None else cv2.cvtColor(rgb, convert)


def image(rgb: np.ndarray, encoding: str = "rgb8", *, pad: int = 0, cut: int = 0) -> Build:
    """An Image of `rgb` in `encoding`, each row padded by `pad` bytes (a step wider than the
    row) and the data `cut` bytes short."""
    pixels = as_encoding(rgb, encoding).reshape(rgb.shape[0], -1)
    rows = np.pad(pixels, ((0, 0), (0, pad))) if pad else pixels
    data = np.ascontiguousarray(rows).reshape(-1)
    data = data[: data.size - cut] if cut else data

    def build(stamp: float) -> Any:
        return JAZZY.types[IMAGE](
            header=header(stamp), height=rgb.shape[0], width=rgb.shape[1], encoding=encoding,
            is_bigendian=0, step=rows.shape[1], data=data,
        )  # fmt: skip

    return build


def compressed(rgb: np.ndarray, fmt: str = "png") -> Build:
    ok, encoded = cv2.imencode(f".{fmt}", cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR))
    assert ok
    data = np.asarray(encoded, dtype=np.uint8).reshape(-1)

    def build(stamp: float) -> Any:
        return JAZZY.types[COMPRESSED](header=header(stamp), format=fmt, data=data)

    return build


def joint_state(names: Sequence[str], positions: Sequence[float]) -> Build:
    values = np.asarray(positions, dtype=np.float64)
    empty = np.empty(0, dtype=np.float64)

    def build(stamp: float) -> Any:
        return JAZZY.types[JOINTS](
            header=header(stamp), name=list(names), position=values, velocity=empty, effort=empty
        )

    return build


class RobotTopics:
    """Publishes `topics` (topic -> (msgtype, build)) every `PERIOD_S` on `peer` until closed."""

    def __init__(self, peer: Peer, topics: Mapping[str, tuple[str, Build]]) -> None:
        self.peer = peer
        self._topics = dict(topics)
        self._publishers = {
            topic: peer.publisher(topic, msgtype) for topic, (msgtype, _) in self._topics.items()
        }
        self._lock = threading.Lock()
        self._paused = threading.Event()
        self._closed = threading.Event()
        self.sent = 0
        self._thread = threading.Thread(target=self._run, name="robot-topics", daemon=True)
        self._thread.start()

    def replace(self, topic: str, build: Build, msgtype: str | None = None) -> None:
        """Publish `build`'s messages on `topic` from now on (of `msgtype`: another type on
        the same topic, when given)."""
        with self._lock:
            kind = msgtype or self._topics[topic][0]
            if kind != self._topics[topic][0]:
                self._publishers[topic] = self.peer.publisher(topic, kind)
            self._topics[topic] = (kind, build)

    def pause(self) -> None:
        self._paused.set()

    def resume(self) -> None:
        self._paused.clear()

    def close(self) -> None:
        self._closed.set()
        self._thread.join(5.0)

    def __enter__(self) -> RobotTopics:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _run(self) -> None:
        while not self._closed.wait(PERIOD_S):
            if self._paused.is_set():
                continue
            stamp = time.time()
            with self._lock:
                for topic, (_, build) in self._topics.items():
                    self.peer.publish(self._publishers[topic], build(stamp))
                self.sent += 1


def statuses(received: Received) -> list[tuple[int, str, dict[str, str]]]:
    """(level, message, values) of each status array received, in order."""
    return [
        (int(s.level), str(s.message), {kv.key: kv.value for kv in s.values})
        for array in received.snapshot()
        for s in array.status
    ]
