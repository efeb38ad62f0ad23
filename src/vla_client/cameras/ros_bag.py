"""Observations from a ROS 2 bag (sqlite3 or MCAP), read with `rosbags`: no ROS installation.

A lab's robot logs are usually rosbag2 files: camera topics (``sensor_msgs/Image`` in rgb8, bgr8,
mono8, rgba8 or bgra8, or ``sensor_msgs/CompressedImage`` in JPEG or PNG) and the joints
(``sensor_msgs/JointState``). `BagSource` replays them as observations, synchronised the way
`CameraRig` synchronises live cameras: each message of the first camera topic (the reference)
takes, from every other camera topic and from the state topic, the message whose header stamp is
nearest to its own; a step where one of them is further than `max_skew_s` away is left out (and
counted in `skipped`), as the rig refuses a frame too old to go with the others. Each frame's
header stamp (seconds of ROS time) travels as its capture time (`Observation.capture_times`), so
the server sees when the frame was taken, and `stamps` gives the reference times, the pace of
``send --rate recorded``.

The chosen topics' messages are read into memory once (a bag of minutes, not hours), and frames
are decoded when their step is handed out. ``rosbags`` is imported here, never by
``import vla_client`` (the ``ros`` extra installs it).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from vla_client.cameras.ros_messages import (
    COMPRESSED,
    IMAGE,
    JOINTS,
    decode_image,
    joint_positions,
    stamp_seconds,
)
from vla_client.errors import CodecError, RecordingError
from vla_client.observation import Observation
from vla_client.validation import check_positive

STATE = "state"
"""The name that marks a topic as the state (JointState positions) rather than a camera."""


@dataclass(frozen=True)
class _Message:
    """One message of a chosen topic: its header stamp in seconds, the message itself and its
    type."""

    stamp: float
    message: Any
    msgtype: str


class BagSource:
    """Synchronised observations from a ROS 2 bag: ``topics`` maps each topic to a camera name,
    or to ``"state"`` for the one JointState topic (`state` is sent with every step where
    no topic gives one).

    Everything is checked when it is built: the bag opens (`RecordingError` naming the path
    otherwise), every topic is in it with a message type this reads (the error lists the bag's
    topics and types), there is at least one camera, and the cameras' messages synchronise
    into at least one step.
    """

    def __init__(
        self,
        path: str | Path,
        topics: Mapping[str, str],
        *,
        max_skew_s: float = 0.05,
        task: str = "",
        state: np.ndarray | None = None,
    ) -> None:
        check_positive("max_skew_s", max_skew_s, finite=True)
        cameras = [topic for topic, name in topics.items() if name != STATE]
        states = [topic for topic, name in topics.items() if name == STATE]
        if not cameras:
            raise ValueError(f"name at least one camera topic (TOPIC=NAME), got {dict(topics)}")
        if len(states) > 1:
            raise ValueError(f"one topic can be the state, got {states}")
        if states and state is not None:
            raise ValueError(f"the state comes from {states[0]}; give no state beside it")
        names = [topics[topic] for topic in cameras]
        if len(set(names)) != len(names):
            raise ValueError(f"each camera topic needs its own name, got {dict(topics)}")
        self.path = str(path)
        self.topics = dict(topics)
        self.max_skew_s = max_skew_s
        self.task = task
        self.state = state
        messages = _read(self.path, self.topics)
        self._steps = _synchronise(messages, cameras, states[0] if states else None, max_skew_s)
        self.skipped = len(messages[cameras[0]]) - len(self._steps)
        """Reference frames left out: another topic had nothing within `max_skew_s`."""
        if not self._steps:
            raise RecordingError(
                f"bag {self.path}: no step where every topic has a message within "
                f"{max_skew_s * 1e3:g} ms of {cameras[0]}'s; raise max_skew_s (--max-skew-ms)"
            )

    @property
    def stamps(self) -> tuple[float, ...]:
        """The reference camera's header stamp (seconds) of each step, in order."""
        return tuple(step[self._reference].stamp for step in self._steps)

    def __len__(self) -> int:
        return len(self._steps)

    def __iter__(self) -> Iterator[Observation]:
        for step in self._steps:
            yield self._observation(step)

    @property
    def _reference(self) -> str:
        return next(topic for topic, name in self.topics.items() if name != STATE)

    def _observation(self, step: Mapping[str, _Message]) -> Observation:
        images, times, state = {}, {}, self.state
        try:
            for topic, found in step.items():
                if self.topics[topic] == STATE:
                    state = joint_positions(found.message)
                    continue
                images[self.topics[topic]] = decode_image(found.message, found.msgtype, topic=topic)
                times[self.topics[topic]] = found.stamp
        except CodecError as exc:
            raise RecordingError(f"bag {self.path}: {exc}") from exc
        return Observation(images, state=state, task=self.task, capture_times=times)


def _read(path: str, topics: Mapping[str, str]) -> dict[str, list[_Message]]:
    """Every message of the chosen topics, by topic, sorted by header stamp."""
    try:
        from rosbags.highlevel import AnyReader
        from rosbags.typesys import Stores, get_typestore
    except ImportError:
        raise ValueError(
            "reading a ROS bag needs rosbags, which is not installed: pip install 'vla-client[ros]'"
        ) from None
    messages: dict[str, list[_Message]] = {topic: [] for topic in topics}
    try:
        with AnyReader([Path(path)], default_typestore=get_typestore(Stores.ROS2_HUMBLE)) as reader:
            available = {c.topic: c.msgtype for c in reader.connections}
            _check_topics(path, topics, available)
            chosen = [c for c in reader.connections if c.topic in topics]
            for connection, _, raw in reader.messages(connections=chosen):
                message: Any = reader.deserialize(raw, connection.msgtype)
                messages[connection.topic].append(
                    _Message(stamp_seconds(message), message, connection.msgtype)
                )
    except RecordingError:
        raise
    except Exception as exc:  # rosbags' own errors name no common base: any is "cannot read"
        raise RecordingError(f"cannot read the ROS bag {path}: {exc}") from exc
    for topic, found in messages.items():
        if not found:
            raise RecordingError(f"bag {path}: topic {topic} holds no messages")
        found.sort(key=lambda m: m.stamp)
    return messages


def _check_topics(path: str, topics: Mapping[str, str], available: Mapping[str, str]) -> None:
    """Each topic is in the bag, with a type its role reads."""
    listing = ", ".join(f"{t} ({m})" for t, m in sorted(available.items())) or "none"
    for topic, name in topics.items():
        if topic not in available:
            raise RecordingError(f"bag {path} has no topic {topic}; its topics: {listing}")
        wanted = (JOINTS,) if name == STATE else (IMAGE, COMPRESSED)
        if available[topic] not in wanted:
            raise RecordingError(
                f"bag {path}: topic {topic} is {available[topic]}; "
                f"{'the state' if name == STATE else 'a camera'} takes {' or '.join(wanted)}"
            )


def _synchronise(
    messages: Mapping[str, list[_Message]],
    cameras: list[str],
    state: str | None,
    max_skew_s: float,
) -> list[dict[str, _Message]]:
    """One step per reference message whose every other topic has a message within
    `max_skew_s` of it (the nearest one)."""
    others = [*cameras[1:], *([state] if state else [])]
    stamps = {topic: [m.stamp for m in messages[topic]] for topic in others}
    steps = []
    for reference in messages[cameras[0]]:
        step = {cameras[0]: reference}
        for topic in others:
            nearest = _nearest(stamps[topic], reference.stamp)
            if abs(stamps[topic][nearest] - reference.stamp) > max_skew_s:
                break
            step[topic] = messages[topic][nearest]
        else:
            steps.append(step)
    return steps


def _nearest(stamps: list[float], stamp: float) -> int:
    """The index of the stamp nearest to `stamp` in sorted `stamps` (the earlier on a tie)."""
    i = bisect.bisect_left(stamps, stamp)
    if i == 0:
        return 0
    if i == len(stamps):
        return i - 1
    return i - 1 if stamp - stamps[i - 1] <= stamps[i] - stamp else i
