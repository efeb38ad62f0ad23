"""Observations from a ROS 2 bag (sqlite3 or MCAP), read with `rosbags`: no ROS installation.

A lab's robot logs are usually rosbag2 files: camera topics (``sensor_msgs/Image`` in rgb8, bgr8,
mono8, rgba8 or bgra8, or ``sensor_msgs/CompressedImage`` in JPEG or PNG), depth topics
(``sensor_msgs/Image`` in 16UC1 or 32FC1, which become `Observation.depth` frames, exactly) and the
joints (``sensor_msgs/JointState``). `BagSource` replays them as observations, synchronised the way
`CameraRig` synchronises live cameras: each message of the first camera topic (the reference) takes,
from every other camera topic and from the state topic, the message whose header stamp is nearest to
its own; a step where one of them is further than `max_skew_s` away is left out (and counted in
`skipped`), as the rig refuses a frame too old to go with the others. Each frame's header stamp
(seconds of ROS time) travels as its capture time (`Observation.capture_times`), so the server sees
when the frame was taken, and `stamps` gives the reference times, the pace of ``send --rate
recorded``.

A bag is read twice, and never held in memory. Building a `BagSource` reads every message of the
chosen topics once, keeping only its header stamp: each image's type, encoding and size and each
joint reading are checked there (`check_image`, `joint_positions`), so a topic that changes encoding
mid-bag to one not read, or between colour, 16UC1 and 32FC1, is refused before the first observation
leaves, and the steps are planned from the stamps. Iterating reads the bag again in storage order
and keeps only the messages a step still to come needs, handing each step out as soon as its
messages are in: memory holds a few messages per topic, whatever the bag's length (more only where a
topic's storage order strays far from its stamp order). The storage's own checks run first
(`bag_integrity`): damaged MCAP chunks are left out and counted (`integrity`), never read.
``rosbags`` is imported here, never by ``import vla_client`` (the ``ros`` extra installs it).
"""

from __future__ import annotations

import bisect
import logging
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from vla_client.cameras.bag_integrity import Integrity, check_storages
from vla_client.cameras.ros_messages import (
    COMPRESSED,
    IMAGE,
    JOINTS,
    check_image,
    decode_depth,
    decode_image,
    is_depth,
    joint_positions,
    stamp_seconds,
)
from vla_client.errors import CodecError, RecordingError
from vla_client.observation import Observation
from vla_client.validation import check_positive

logger = logging.getLogger(__name__)

STATE = "state"
"""The name that marks a topic as the state (JointState positions) rather than a camera."""

_Key = tuple[str, int]
"""A message of a chosen topic: the topic and the message's place in it, in storage order."""


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
    topics and types), every message of those topics can be read (an image's encoding and
    size, a JointState's positions), there is at least one camera, and the cameras' messages
    synchronise into at least one step. Damaged MCAP chunks are left out, counted in
    `integrity` and logged once.
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
        stamps, self.integrity = _survey(self.path, self.topics)
        """What the storage's own checks found (`bag_integrity.Integrity`)."""
        self._stamps = {topic: dict(found) for topic, found in stamps.items()}
        self._steps = _synchronise(stamps, cameras, states[0] if states else None, max_skew_s)
        self.skipped = len(stamps[cameras[0]]) - len(self._steps)
        """Reference frames left out: another topic had nothing within `max_skew_s`."""
        if not self._steps:
            raise RecordingError(
                f"bag {self.path}: no step where every topic has a message within "
                f"{max_skew_s * 1e3:g} ms of {cameras[0]}'s; raise max_skew_s (--max-skew-ms)"
            )

    @property
    def stamps(self) -> tuple[float, ...]:
        """The reference camera's header stamp (seconds) of each step, in order."""
        return tuple(self._stamps[self._reference][step[self._reference]] for step in self._steps)

    def __len__(self) -> int:
        return len(self._steps)

    def __iter__(self) -> Iterator[Observation]:
        uses = Counter((topic, n) for step in self._steps for topic, n in step.items())
        ready: dict[_Key, _Message] = {}
        done = 0
        for key, message in _read(self.path, self.topics, Integrity(), needed=uses):
            if message.stamp != self._stamps[key[0]][key[1]]:
                raise RecordingError(f"bag {self.path} changed while it was read: {key[0]}")
            ready[key] = message
            while done < len(self._steps) and all(
                (topic, n) in ready for topic, n in self._steps[done].items()
            ):
                step = self._steps[done]
                yield self._observation({topic: ready[topic, n] for topic, n in step.items()})
                for key_ in step.items():
                    uses[key_] -= 1
                    if not uses[key_]:
                        del ready[key_]
                done += 1
        if done < len(self._steps):
            raise RecordingError(
                f"bag {self.path} changed while it was read: {len(self._steps) - done} step(s) "
                "lost their messages"
            )

    @property
    def _reference(self) -> str:
        return next(topic for topic, name in self.topics.items() if name != STATE)

    def _observation(self, step: Mapping[str, _Message]) -> Observation:
        images, depth, times, state = {}, {}, {}, self.state
        try:
            for topic, found in step.items():
                name = self.topics[topic]
                if name == STATE:
                    state = joint_positions(found.message)
                    continue
                if is_depth(found.message, found.msgtype):
                    depth[name] = decode_depth(found.message, found.msgtype, topic=topic)
                else:
                    images[name] = decode_image(found.message, found.msgtype, topic=topic)
                times[name] = found.stamp
        except CodecError as exc:
            raise RecordingError(f"bag {self.path}: {exc}") from exc
        return Observation(images, state=state, task=self.task, capture_times=times, depth=depth)


def _survey(
    path: str, topics: Mapping[str, str]
) -> tuple[dict[str, list[tuple[int, float]]], Integrity]:
    """Every message of the chosen topics checked without decoding a pixel: by topic, each
    message's place in storage order and header stamp, sorted by stamp; and what the
    storage's checks found."""
    found: dict[str, list[tuple[int, float]]] = {topic: [] for topic in topics}
    kinds: dict[str, str] = {}  # per camera topic, what its first message is
    integrity = Integrity()
    for (topic, n), message in _read(path, topics, integrity):
        try:
            if topics[topic] == STATE:
                joint_positions(message.message)
            else:
                check_image(message.message, message.msgtype, topic=topic)
                _check_kind(kinds, topic, message)
        except CodecError as exc:
            raise RecordingError(
                f"bag {path}: {exc} (message {n + 1} of {topic}, stamped {message.stamp:.9f} s)"
            ) from exc
        found[topic].append((n, message.stamp))
    for topic, messages in found.items():
        if not messages:
            raise RecordingError(f"bag {path}: topic {topic} holds no messages")
        messages.sort(key=lambda m: m[1])
    if integrity.damaged_chunks:
        logger.warning(
            "bag %s: %d damaged MCAP chunk(s) left out (CRC or size mismatch): %d message(s) "
            "of the chosen topics lost", path, integrity.damaged_chunks, integrity.lost_messages,
        )  # fmt: skip
    return found, integrity


def _check_kind(kinds: dict[str, str], topic: str, message: _Message) -> None:
    """`CodecError` when `topic` turns from colour to depth, from depth to colour, or from one
    depth encoding to the other: a camera's frames keep one kind (and a depth one its dtype)."""
    kind = message.message.encoding.upper() if is_depth(message.message, message.msgtype) else ""
    first = kinds.setdefault(topic, kind)
    if kind != first:
        raise CodecError(
            f"{topic} turns from {first or 'colour'} to {kind or 'colour'}; a camera topic "
            "keeps one kind of image"
        )


def _read(
    path: str,
    topics: Mapping[str, str],
    integrity: Integrity,
    *,
    needed: Mapping[_Key, int] | None = None,
) -> Iterator[tuple[_Key, _Message]]:
    """The chosen topics' messages in storage order, each with its place in its topic; given
    `needed`, only those it counts (the others are not deserialised). `integrity` gets what
    the storage's checks found."""
    try:
        from rosbags.highlevel import AnyReader
        from rosbags.typesys import Stores, get_typestore
    except ImportError:
        raise ValueError(
            "reading a ROS bag needs rosbags, which is not installed: pip install 'vla-client[ros]'"
        ) from None
    try:
        with AnyReader([Path(path)], default_typestore=get_typestore(Stores.ROS2_HUMBLE)) as reader:
            available = {c.topic: c.msgtype for c in reader.connections}
            _check_topics(path, topics, available)
            check_storages(reader, path, topics, integrity)
            chosen = [c for c in reader.connections if c.topic in topics]
            places = Counter[str]()
            for connection, _, raw in reader.messages(connections=chosen):
                key = (connection.topic, places[connection.topic])
                places[connection.topic] += 1
                if needed is None or needed.get(key):
                    message: Any = reader.deserialize(raw, connection.msgtype)
                    yield key, _Message(stamp_seconds(message), message, connection.msgtype)
    except RecordingError:
        raise
    except Exception as exc:  # rosbags' own errors name no common base: any is "cannot read"
        raise RecordingError(f"cannot read the ROS bag {path}: {exc}") from exc


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
    messages: Mapping[str, Sequence[tuple[int, float]]],
    cameras: list[str],
    state: str | None,
    max_skew_s: float,
) -> list[dict[str, int]]:
    """One step per reference message whose every other topic has a message within
    `max_skew_s` of it (the nearest one): each step maps a topic to its message's place."""
    others = [*cameras[1:], *([state] if state else [])]
    stamps = {topic: [stamp for _, stamp in messages[topic]] for topic in others}
    steps = []
    for place, stamp in messages[cameras[0]]:
        step = {cameras[0]: place}
        for topic in others:
            nearest = _nearest(stamps[topic], stamp)
            if abs(stamps[topic][nearest] - stamp) > max_skew_s:
                break
            step[topic] = messages[topic][nearest][0]
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
